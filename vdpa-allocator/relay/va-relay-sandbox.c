/* SPDX-License-Identifier: LGPL-2.1-or-later */
#define G_LOG_DOMAIN "va-relay-sandbox"
#define _GNU_SOURCE

#include "va-relay-sandbox.h"

#include <errno.h>
#include <grp.h>
#include <linux/vduse.h>
#include <pwd.h>
#include <seccomp.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <unistd.h>

#include "va-error.h"

gboolean
va_relay_drop_privileges (const char *user, GError **error)
{
  if (user == NULL)
    return TRUE;
  struct passwd *pw = getpwnam (user);
  if (pw == NULL)
    {
      g_set_error (error, VA_ERROR, VA_ERROR_INVALID_ARGUMENT, "no user %s", user);
      return FALSE;
    }
  if (pw->pw_uid == 0)
    {
      g_set_error (error, VA_ERROR, VA_ERROR_INVALID_ARGUMENT, "user %s is root", user);
      return FALSE;
    }
  if ((geteuid () == 0 && setgroups (0, NULL) < 0) || setresgid (pw->pw_gid, pw->pw_gid, pw->pw_gid) < 0
      || setresuid (pw->pw_uid, pw->pw_uid, pw->pw_uid) < 0)
    {
      g_set_error (error, VA_ERROR, VA_ERROR_PERMISSION_DENIED, "becoming %s: %s", user, strerror (errno));
      return FALSE;
    }
  /* no way back */
  if (setuid (0) == 0)
    {
      g_set_error (error, VA_ERROR, VA_ERROR_PERMISSION_DENIED, "could become root again after dropping to %s", user);
      return FALSE;
    }
  return TRUE;
}

gboolean
va_relay_limit_memory (guint64 max_bytes, GError **error)
{
  struct
  {
    int resource;
    rlim_t value;
    const char *name;
  } limits[] = {
    { RLIMIT_DATA, max_bytes, "RLIMIT_DATA" },
    /* stdin, stdout, stderr, the device, the tap, two kicks, and a
     * transient IOTLB fd (closed after mmap) */
    { RLIMIT_NOFILE, 16, "RLIMIT_NOFILE" },
    { RLIMIT_NPROC, 0, "RLIMIT_NPROC" },
    { RLIMIT_CORE, 0, "RLIMIT_CORE" },
  };
  for (gsize i = 0; i < G_N_ELEMENTS (limits); i++)
    {
#if defined(__SANITIZE_ADDRESS__)
      /* AddressSanitizer's shadow is terabytes of private writable
       * mappings: any RLIMIT_DATA fails its next mmap. Sanitizer builds
       * are for the tests, not for hosts */
      if (limits[i].resource == RLIMIT_DATA)
        continue;
#endif
      struct rlimit rl = { limits[i].value, limits[i].value };
      if (setrlimit (limits[i].resource, &rl) < 0)
        {
          g_set_error (error, VA_ERROR, VA_ERROR_FAILED, "%s: %s", limits[i].name, strerror (errno));
          return FALSE;
        }
    }
  return TRUE;
}

gboolean
va_relay_seccomp (GError **error)
{
  /* the device loop, GLib's allocator and logging to stderr, and exit */
  static const int allowed[] = {
    SCMP_SYS (read),         SCMP_SYS (write),          SCMP_SYS (readv),           SCMP_SYS (writev),
    SCMP_SYS (close),        SCMP_SYS (poll),           SCMP_SYS (ppoll),           SCMP_SYS (mmap),
    SCMP_SYS (munmap),       SCMP_SYS (mremap),         SCMP_SYS (madvise),         SCMP_SYS (brk),
    SCMP_SYS (futex),        SCMP_SYS (eventfd2),       SCMP_SYS (fcntl),           SCMP_SYS (clock_gettime),
    SCMP_SYS (getpid),       SCMP_SYS (gettid),         SCMP_SYS (newfstatat),      SCMP_SYS (fstat),
    SCMP_SYS (rt_sigreturn), SCMP_SYS (rt_sigprocmask), SCMP_SYS (restart_syscall), SCMP_SYS (exit),
    SCMP_SYS (exit_group),
  };
  /* ioctl: the device's own requests only (linux/vduse.h) */
  static const unsigned long ioctls[] = {
    VDUSE_IOTLB_GET_FD, VDUSE_DEV_GET_FEATURES, VDUSE_VQ_GET_INFO, VDUSE_VQ_SETUP_KICKFD, VDUSE_VQ_INJECT_IRQ,
  };
  scmp_filter_ctx ctx = seccomp_init (SCMP_ACT_KILL_PROCESS);
  int rc = 0;

  if (ctx == NULL)
    {
      g_set_error (error, VA_ERROR, VA_ERROR_FAILED, "seccomp_init failed");
      return FALSE;
    }
  for (gsize i = 0; i < G_N_ELEMENTS (allowed) && rc == 0; i++)
    rc = seccomp_rule_add (ctx, SCMP_ACT_ALLOW, allowed[i], 0);
  for (gsize i = 0; i < G_N_ELEMENTS (ioctls) && rc == 0; i++)
    rc = seccomp_rule_add (ctx, SCMP_ACT_ALLOW, SCMP_SYS (ioctl), 1, SCMP_A1 (SCMP_CMP_EQ, ioctls[i]));
  /* NO_NEW_PRIVS is libseccomp's default (SCMP_FLTATR_CTL_NNP) */
  if (rc == 0)
    rc = seccomp_load (ctx);
  seccomp_release (ctx);
  if (rc != 0)
    {
      g_set_error (error, VA_ERROR, VA_ERROR_FAILED, "loading the seccomp filter: %s", strerror (-rc));
      return FALSE;
    }
  return TRUE;
}
