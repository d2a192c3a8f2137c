/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* vdpa-allocator-relay itself, on a fake device: a SOCK_SEQPACKET socket
 * that speaks VDUSE's messages (struct vduse_dev_request in, struct
 * vduse_dev_response out, as drivers/vdpa/vdpa_user/vduse_dev.c's read and
 * write do), a SOCK_DGRAM socket for the tap. It answers each message under
 * its seccomp filter (a system call outside the filter would kill it with
 * SIGSYS), is sandboxed (/proc/PID/status: Seccomp 2, NoNewPrivs 1; as root
 * with --user, that user's ids), and exits 0 when the device hangs up. */
#include <gio/gio.h>
#include <linux/vduse.h>
#include <linux/virtio_config.h>
#include <pwd.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

static const char *relay_path;

typedef struct
{
  GSubprocess *proc;
  int dev; /* our end of the device */
  int tap; /* our end of the tap */
} Relay;

/* valgrind: the relay under valgrind, which needs --no-sandbox (it refuses
 * RLIMIT_NOFILE and runs nothing under a seccomp filter) */
static void
relay_start_full (Relay *r, const char *user, gboolean valgrind)
{
  int dev[2], tap[2];
  g_autoptr (GError) error = NULL;
  g_autoptr (GSubprocessLauncher) l = g_subprocess_launcher_new (G_SUBPROCESS_FLAGS_STDERR_PIPE);

  g_assert_no_errno (socketpair (AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, dev));
  g_assert_no_errno (socketpair (AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0, tap));
  g_subprocess_launcher_take_fd (l, dev[1], 3);
  g_subprocess_launcher_take_fd (l, tap[1], 4);
  /* LeakSanitizer's report at exit needs ptrace: not in the filter */
  const char *asan = g_getenv ("ASAN_OPTIONS");
  g_autofree char *asan_opts = g_strdup_printf ("%s%sdetect_leaks=0", asan ? asan : "", asan ? ":" : "");
  g_subprocess_launcher_setenv (l, "ASAN_OPTIONS", asan_opts, TRUE);
  g_autofree char *user_arg = user ? g_strdup_printf ("--user=%s", user) : NULL;
  g_autoptr (GPtrArray) argv = g_ptr_array_new ();
  if (valgrind)
    {
      const char *vg[] = { "valgrind",          "--error-exitcode=9",
                           "--leak-check=full", "--errors-for-leak-kinds=definite",
                           "--quiet",           "--suppressions=/usr/share/glib-2.0/valgrind/glib.supp" };
      for (gsize i = 0; i < G_N_ELEMENTS (vg); i++)
        g_ptr_array_add (argv, (gpointer) vg[i]);
    }
  g_ptr_array_add (argv, (gpointer) relay_path);
  g_ptr_array_add (argv, "--device-fd=3");
  g_ptr_array_add (argv, "--tap-fd=4");
  g_ptr_array_add (argv, "--verbose");
  if (valgrind)
    g_ptr_array_add (argv, "--no-sandbox");
  if (user_arg)
    g_ptr_array_add (argv, user_arg);
  g_ptr_array_add (argv, NULL);
  r->proc = g_subprocess_launcher_spawnv (l, (const char *const *) argv->pdata, &error);
  g_assert_no_error (error);
  r->dev = dev[0];
  r->tap = tap[0];
}

static void
relay_start (Relay *r, const char *user)
{
  relay_start_full (r, user, FALSE);
}

static struct vduse_dev_response
ask (Relay *r, const struct vduse_dev_request *req)
{
  struct vduse_dev_response resp;
  g_assert_cmpint (write (r->dev, req, sizeof *req), ==, sizeof *req);
  g_assert_cmpint (read (r->dev, &resp, sizeof resp), ==, sizeof resp);
  g_assert_cmpuint (resp.request_id, ==, req->request_id);
  return resp;
}

/* the device goes: the relay exits 0, not by a signal */
static char *
relay_finish (Relay *r)
{
  g_autoptr (GError) error = NULL;
  g_autofree char *err = NULL;

  close (r->dev);
  g_assert_true (g_subprocess_communicate_utf8 (r->proc, NULL, NULL, NULL, &err, &error));
  g_assert_no_error (error);
  g_test_message ("relay's stderr:\n%s", err);
  g_assert_true (g_subprocess_get_if_exited (r->proc));
  g_assert_cmpint (g_subprocess_get_exit_status (r->proc), ==, 0);
  g_clear_object (&r->proc);
  close (r->tap);
  return g_steal_pointer (&err);
}

static char *
proc_status_field (GSubprocess *proc, const char *field)
{
  g_autofree char *path = g_strdup_printf ("/proc/%s/status", g_subprocess_get_identifier (proc));
  g_autofree char *text = NULL;
  g_assert_true (g_file_get_contents (path, &text, NULL, NULL));
  g_auto (GStrv) lines = g_strsplit (text, "\n", -1);
  for (char **l = lines; *l; l++)
    if (g_str_has_prefix (*l, field) && (*l)[strlen (field)] == ':')
      return g_strstrip (g_strdup (*l + strlen (field) + 1));
  return NULL;
}

static void
exchange (Relay *r, gboolean sandboxed)
{
  struct vduse_dev_request req = { 0 };
  struct vduse_dev_response resp;

  /* a queue not running yet: its index is the kernel's (VDUSE_VQ_GET_INFO,
   * an ioctl the filter allows), which this socket refuses; answered 0
   * before, whatever set_vq_state had given (lab-software reads it back
   * through vhost-vdpa) */
  req = (struct vduse_dev_request){ .type = VDUSE_GET_VQ_STATE, .request_id = 1, .vq_state.index = 1 };
  resp = ask (r, &req);
  g_assert_cmpuint (resp.result, ==, VDUSE_REQ_RESULT_FAILED);

  /* a queue the device does not have */
  req = (struct vduse_dev_request){ .type = VDUSE_GET_VQ_STATE, .request_id = 2, .vq_state.index = 2 };
  g_assert_cmpuint (ask (r, &req).result, ==, VDUSE_REQ_RESULT_FAILED);

  req = (struct vduse_dev_request){ .type = VDUSE_SET_STATUS,
                                    .request_id = 3,
                                    .s.status = VIRTIO_CONFIG_S_ACKNOWLEDGE | VIRTIO_CONFIG_S_DRIVER };
  g_assert_cmpuint (ask (r, &req).result, ==, VDUSE_REQ_RESULT_OK);

  req = (struct vduse_dev_request){ .type = VDUSE_UPDATE_IOTLB, .request_id = 4, .iova = { .start = 0, .last = 4095 } };
  g_assert_cmpuint (ask (r, &req).result, ==, VDUSE_REQ_RESULT_OK);

  req = (struct vduse_dev_request){ .type = 99, .request_id = 5 };
  g_assert_cmpuint (ask (r, &req).result, ==, VDUSE_REQ_RESULT_FAILED);

  /* DRIVER_OK: the relay asks the device for the features (an ioctl the
   * filter allows; a socket says ENOTTY) and still answers */
  req = (struct vduse_dev_request){ .type = VDUSE_SET_STATUS, .request_id = 6, .s.status = 0x0f };
  g_assert_cmpuint (ask (r, &req).result, ==, VDUSE_REQ_RESULT_OK);

  /* sandboxed while it runs */
  if (sandboxed)
    {
      g_autofree char *seccomp = proc_status_field (r->proc, "Seccomp");
      g_autofree char *nnp = proc_status_field (r->proc, "NoNewPrivs");
      g_assert_cmpstr (seccomp, ==, "2");
      g_assert_cmpstr (nnp, ==, "1");
    }
}

static void
test_messages (void)
{
  Relay r;

  relay_start (&r, NULL);
  exchange (&r, TRUE);
  g_autofree char *err = relay_finish (&r);
  g_assert_nonnull (strstr (err, "VDUSE_DEV_GET_FEATURES"));
  g_assert_nonnull (strstr (err, "the device went"));
}

/* the same messages with the relay under valgrind: no error, no definite
 * leak (exit status 9 otherwise) */
static void
test_valgrind (void)
{
#if defined(__SANITIZE_ADDRESS__)
  /* this build's relay is under AddressSanitizer, which valgrind cannot run */
  g_test_skip ("an AddressSanitizer build");
  return;
#endif
  g_autofree char *vg = g_find_program_in_path ("valgrind");
  if (vg == NULL)
    {
      g_test_skip ("no valgrind");
      return;
    }
  Relay r;
  relay_start_full (&r, NULL, TRUE);
  exchange (&r, FALSE);
  g_autofree char *err = relay_finish (&r);
  g_assert_nonnull (strstr (err, "the device went"));
}

/* as root with --user: that user's ids, no supplementary groups */
static void
test_user (void)
{
  if (geteuid () != 0)
    {
      g_test_skip ("needs root");
      return;
    }
  struct passwd *pw = getpwnam ("nobody");
  if (pw == NULL)
    {
      g_test_skip ("no user nobody");
      return;
    }
  Relay r;
  relay_start (&r, "nobody");
  /* one answered message: the relay is past its set-up */
  struct vduse_dev_request req = { .type = VDUSE_SET_STATUS, .request_id = 1, .s.status = VIRTIO_CONFIG_S_ACKNOWLEDGE };
  g_assert_cmpuint (ask (&r, &req).result, ==, VDUSE_REQ_RESULT_OK);
  g_autofree char *uid = proc_status_field (r.proc, "Uid");
  g_autofree char *groups = proc_status_field (r.proc, "Groups");
  g_autofree char *want = g_strdup_printf ("%u\t%u\t%u\t%u", pw->pw_uid, pw->pw_uid, pw->pw_uid, pw->pw_uid);
  g_assert_cmpstr (uid, ==, want);
  g_assert_cmpstr (groups, ==, "");
  g_free (relay_finish (&r));
}

static void
test_usage (void)
{
  g_autoptr (GError) error = NULL;
  const char *bad[][3] = { { "--tap-fd=4", NULL }, { "--device-fd=3", NULL }, { "--device-fd=3", "--tap-fd=4" } };
  for (gsize i = 0; i < G_N_ELEMENTS (bad); i++)
    {
      g_autoptr (GSubprocess) p = g_subprocess_new (G_SUBPROCESS_FLAGS_STDERR_SILENCE, &error, relay_path, bad[i][0], bad[i][1], NULL);
      g_assert_no_error (error);
      g_assert_true (g_subprocess_wait (p, NULL, &error));
      /* 2: usage; 1: fds 3 and 4 are not open here */
      g_assert_cmpint (g_subprocess_get_exit_status (p), ==, i < 2 ? 2 : 1);
    }
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  relay_path = g_getenv ("VA_RELAY");
  g_assert_nonnull (relay_path);
  g_test_add_func ("/relay/dev/messages", test_messages);
  g_test_add_func ("/relay/dev/user", test_user);
  g_test_add_func ("/relay/dev/valgrind", test_valgrind);
  g_test_add_func ("/relay/dev/usage", test_usage);
  return g_test_run ();
}
