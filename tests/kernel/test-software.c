/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The parts of a software vDPA device (issue 28) that this machine's kernel
 * has: the names, and a real tap on a real VLAN-filtering bridge in a
 * network namespace of this test's own (the tap joins the NIC's VLAN as
 * untagged PVID and leaves VLAN 1, by the portable form's rule). VDUSE
 * itself is the lab's (tests/lab/test_lab_software.py): here only its
 * absence, said in one line. */
#define _GNU_SOURCE
#include <glib.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "va-error.h"
#include "va-software.h"

static int
sh (const char *cmd)
{
  int status = system (cmd);
  return WIFEXITED (status) ? WEXITSTATUS (status) : -1;
}

static void
test_names (void)
{
  g_autofree char *dev = va_software_device_name ("52:54:00:AB:cd:01");
  g_autofree char *tap = va_software_tap_name ("52:54:00:ab:cd:01");

  g_assert_cmpstr (dev, ==, "vasw-525400abcd01");
  g_assert_cmpstr (tap, ==, "vs525400abcd01");
  g_assert_cmpuint (strlen (tap), <, 16); /* IFNAMSIZ */
  g_assert_true (va_software_is_device_name (dev));
  g_assert_false (va_software_is_device_name ("va-0000:3b:00.2"));
  g_assert_null (va_software_device_name ("52:54:00:ab:cd"));
  g_assert_null (va_software_device_name ("52:54:00:ab:cd:01:02"));
  g_assert_null (va_software_tap_name ("52-54-00-ab-cd-01"));
}

/* Without VDUSE (this machine; Debian 12's 6.1), making one says so in one
 * line, and destroying one is no error. */
static void
test_no_vduse (void)
{
  static const guint8 mac[6] = { 0x52, 0x54, 0, 0, 0, 1 };
  g_autoptr (GError) error = NULL;

  if (g_file_test ("/dev/vduse/control", G_FILE_TEST_EXISTS))
    {
      g_test_skip ("this host has VDUSE");
      return;
    }
  g_assert_cmpint (va_software_vduse_create ("vasw-525400000001", mac, 0, &error), ==, -1);
  g_assert_error (error, VA_ERROR, VA_ERROR_NOT_FOUND);
  g_assert_cmpstr (
    error->message, ==,
    "software device vasw-525400000001: /dev/vduse/control: No such file or directory (load the vduse module: modprobe vduse)");
  g_clear_error (&error);
  g_assert_true (va_software_vduse_destroy ("vasw-525400000001", &error));
  g_assert_no_error (error);
}

static void
test_tap_on_bridge (void)
{
  g_autoptr (GError) error = NULL;
  g_autofree char *out = NULL;
  int fd, fd2;

  if (geteuid () != 0 || unshare (CLONE_NEWNET) < 0)
    {
      g_test_skip ("needs root for a private network namespace");
      return;
    }
  gboolean filtering;

  g_assert_cmpint (sh ("ip link add br0 type bridge"), ==, 0);
  filtering = sh ("ip link set br0 type bridge vlan_filtering 1 2>/dev/null") == 0;
  fd = va_software_tap_open ("vs525400000001", &error);
  g_assert_no_error (error);
  g_assert_cmpint (fd, >=, 0);
  /* a second open of the same tap, as by another NIC of this MAC: refused */
  fd2 = va_software_tap_open ("vs525400000001", &error);
  g_assert_cmpint (fd2, ==, -1);
  g_assert_nonnull (error);
  g_assert_null (strchr (error->message, '\n'));
  g_clear_error (&error);

  if (!filtering)
    {
      /* this machine's kernel (no CONFIG_BRIDGE_VLAN_FILTERING): a NIC
       * with a VLAN fails closed, in one line; an untagged one joins */
      g_assert_false (va_software_tap_join ("vs525400000001", "br0", VA_BRIDGE_LINUX, 20, &error));
      g_assert_nonnull (strstr (error->message, "tap vs525400000001 on Linux bridge br0, VLAN 20: "));
      g_assert_null (strchr (error->message, '\n'));
      g_clear_error (&error);
      g_assert_true (va_software_tap_join ("vs525400000001", "br0", VA_BRIDGE_LINUX, 0, &error));
      g_assert_no_error (error);
      g_assert_cmpint (sh ("ip -o link show vs525400000001 | grep -q 'master br0'"), ==, 0);
    }
  else
    {
      g_assert_true (va_software_tap_join ("vs525400000001", "br0", VA_BRIDGE_LINUX, 20, &error));
      g_assert_no_error (error);
      g_assert_cmpint (sh ("ip -o link show vs525400000001 | grep -q 'master br0'"), ==, 0);
      /* VLAN 20 untagged PVID, and not VLAN 1: an untagged frame of the
       * guest never lands on the bridge's default VLAN */
      g_assert_true (g_spawn_command_line_sync ("bridge -j vlan show dev vs525400000001", &out, NULL, NULL, &error));
      g_assert_no_error (error);
      g_assert_nonnull (strstr (out, "\"vlan\":20"));
      g_assert_nonnull (strstr (out, "\"PVID\""));
      g_assert_nonnull (strstr (out, "\"Egress Untagged\""));
      g_assert_null (strstr (out, "\"vlan\":1,"));
      g_assert_null (strstr (out, "\"vlan\":1}"));
    }

  /* no bridge of that name: one line naming the tap and the bridge */
  g_assert_false (va_software_tap_join ("vs525400000001", "nobr0", VA_BRIDGE_LINUX, 20, &error));
  g_assert_nonnull (strstr (error->message, "tap vs525400000001 on Linux bridge nobr0, VLAN 20: "));
  g_assert_null (strchr (error->message, '\n'));
  g_clear_error (&error);
  g_assert_false (va_software_tap_join ("vs525400000001", "ovsbr0", VA_BRIDGE_OVS, 20, &error));
  g_assert_cmpstr (error->message, ==,
                   "tap vs525400000001: fallback bridge ovsbr0 is Open vSwitch, and software devices join Linux bridges only so far");
  g_clear_error (&error);

  /* not persistent: the tap goes with its last fd (the relay's) */
  close (fd);
  g_assert_cmpint (sh ("ip link show vs525400000001 >/dev/null 2>&1"), !=, 0);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/software/names", test_names);
  g_test_add_func ("/software/no-vduse", test_no_vduse);
  /* last: it unshares this process's network namespace */
  g_test_add_func ("/software/tap-on-bridge", test_tap_on_bridge);
  return g_test_run ();
}
