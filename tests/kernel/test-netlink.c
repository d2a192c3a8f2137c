/* SPDX-License-Identifier: LGPL-2.1-or-later */
#define _GNU_SOURCE
/* Netlink messages byte for byte against fixtures (tests/kernel/netlink),
 * and the real kernel where this machine has the feature. */
#include <errno.h>
#include <linux/genetlink.h>
#include <linux/if_bridge.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "va-error.h"
#include "va-netlink.h"

static const guint8 mac[6] = { 0x52, 0x54, 0x00, 0x12, 0x34, 0x56 };
static const guint8 zero_mac[6] = { 0 };

static GBytes *
fixture (const char *name)
{
  g_autofree char *file = g_strdup_printf ("%s.hex", name);
  g_autofree char *path = g_build_filename (g_getenv ("VA_SRCDIR"), "tests", "kernel", "netlink", file, NULL);
  g_autofree char *hex = NULL;
  g_autoptr (GError) error = NULL;
  GByteArray *bytes = g_byte_array_new ();

  g_assert_true (g_file_get_contents (path, &hex, NULL, &error));
  g_strstrip (hex);
  g_assert_cmpuint (strlen (hex) % 2, ==, 0);
  g_assert_cmpuint (strlen (hex), >, 32);
  for (gsize i = 0; hex[i]; i += 2)
    {
      guint8 b = (guint8) (g_ascii_xdigit_value (hex[i]) << 4 | g_ascii_xdigit_value (hex[i + 1]));
      g_byte_array_append (bytes, &b, 1);
    }
  return g_byte_array_free_to_bytes (bytes);
}

static guint32
fixture_u32 (GBytes *b, gsize off)
{
  guint32 v;
  memcpy (&v, (const guint8 *) g_bytes_get_data (b, NULL) + off, 4);
  return v;
}

static void
assert_same (const struct nlmsghdr *nlh, GBytes *expected)
{
  g_autofree char *got = g_strnfill (nlh->nlmsg_len * 2, '0');

  for (guint i = 0; i < nlh->nlmsg_len; i++)
    g_snprintf (got + 2 * i, 3, "%02x", ((const guint8 *) nlh)[i]);
  g_test_message ("built: %s", got);
  g_assert_cmpmem (nlh, nlh->nlmsg_len, g_bytes_get_data (expected, NULL), g_bytes_get_size (expected));
}

/* Captured from iproute2: seq at offset 8, ifindex at 20. */
static void
test_bridge_vlan (void)
{
  char buf[VA_NL_BUF_SIZE];
  g_autoptr (GBytes) add = fixture ("bridge-vlan-add-pvid-untagged");
  g_autoptr (GBytes) del1 = fixture ("bridge-vlan-del-1");
  g_autoptr (GBytes) del = fixture ("bridge-vlan-del-2334");

  assert_same (va_nl_build_bridge_vlan (buf, fixture_u32 (add, 8), (int) fixture_u32 (add, 20), TRUE, 2334,
                                        BRIDGE_VLAN_INFO_PVID | BRIDGE_VLAN_INFO_UNTAGGED),
               add);
  assert_same (va_nl_build_bridge_vlan (buf, fixture_u32 (del1, 8), (int) fixture_u32 (del1, 20), FALSE, 1, 0), del1);
  assert_same (va_nl_build_bridge_vlan (buf, fixture_u32 (del, 8), (int) fixture_u32 (del, 20), FALSE, 2334, 0), del);
}

static void
test_vf_set (void)
{
  char buf[VA_NL_BUF_SIZE];
  g_autoptr (GBytes) set = fixture ("vf-set-vst");
  g_autoptr (GBytes) reset = fixture ("vf-reset");

  assert_same (va_nl_build_vf_set (buf, fixture_u32 (set, 8), (int) fixture_u32 (set, 20), 3, mac, 2334, TRUE, FALSE), set);
  assert_same (va_nl_build_vf_set (buf, fixture_u32 (reset, 8), (int) fixture_u32 (reset, 20), 3, zero_mac, 0, FALSE, FALSE), reset);
}

/* The kernel reports VF settings in the layout a set request uses
 * (IFLA_VFINFO_LIST, IFLA_VF_INFO, IFLA_VF_MAC, IFLA_VF_VLAN): the parser
 * finds VF 3's and no other VF's. */
static void
test_vf_state_parsed (void)
{
  char buf[VA_NL_BUF_SIZE];
  struct nlmsghdr *nlh = va_nl_build_vf_set (buf, 1, 5, 3, mac, 2334, TRUE, FALSE);
  guint8 got[6] = { 0 };
  guint16 vlan = 0;

  g_assert_true (va_nl_parse_vf_state (nlh, 3, got, &vlan));
  g_assert_cmpmem (got, 6, mac, 6);
  g_assert_cmpuint (vlan, ==, 2334);
  g_assert_false (va_nl_parse_vf_state (nlh, 2, got, &vlan));
  nlh = va_nl_build_link_get_vfs (buf, 1, 5);
  g_assert_false (va_nl_parse_vf_state (nlh, 3, got, &vlan)); /* a request, not a reply */
}

/* spoofchk and trust read back from the same layout; the flags-only
 * request carries them and no MAC or VLAN (mlx5 in switchdev refuses
 * them, and libvirt set the MAC and VLAN), the switchdev reset no flags. */
static void
test_vf_flags_parsed (void)
{
  char buf[VA_NL_BUF_SIZE];
  struct nlmsghdr *nlh = va_nl_build_vf_set (buf, 1, 5, 3, mac, 2334, TRUE, FALSE);
  gboolean spoofchk = FALSE, trust = TRUE;
  guint8 got[6];
  guint16 vlan;

  g_assert_true (va_nl_parse_vf_flags (nlh, 3, &spoofchk, &trust));
  g_assert_true (spoofchk);
  g_assert_false (trust);
  g_assert_false (va_nl_parse_vf_flags (nlh, 2, &spoofchk, &trust));

  nlh = va_nl_build_vf_flags (buf, 1, 5, 3, FALSE, TRUE);
  g_assert_true (va_nl_parse_vf_flags (nlh, 3, &spoofchk, &trust));
  g_assert_false (spoofchk);
  g_assert_true (trust);
  g_assert_false (va_nl_parse_vf_state (nlh, 3, got, &vlan));

  nlh = va_nl_build_vf_mac_vlan (buf, 1, 5, 3, mac, 0);
  g_assert_true (va_nl_parse_vf_state (nlh, 3, got, &vlan));
  g_assert_cmpuint (vlan, ==, 0);
  g_assert_false (va_nl_parse_vf_flags (nlh, 3, &spoofchk, &trust));
}

/* A generic netlink request captured from iproute2 in the lab host
 * (capture-genl.sh): iproute2 6.1 links libmnl 1.0.4, whose mnl_attr_put
 * leaves an attribute's alignment padding as its buffer had it (there, the
 * CTRL_CMD_GETFAMILY reply it received just before: vdpa-dev-new.hex has
 * "01 00" after MAX_VQP). Those bytes mean nothing, and va-netlink.c zeroes
 * them; zero them here too, in the top-level attributes after the genl
 * header, and say how many were not zero already. */
static GBytes *
genl_fixture (const char *name)
{
  g_autoptr (GBytes) raw = fixture (name);
  gsize size;
  guint8 *b = g_bytes_unref_to_data (g_steal_pointer (&raw), &size);
  guint cleared = 0;

  for (gsize off = NLMSG_HDRLEN + GENL_HDRLEN; off + NLA_HDRLEN <= size;)
    {
      guint16 len;

      memcpy (&len, b + off, 2);
      g_assert_cmpuint (len, >=, NLA_HDRLEN);
      g_assert_cmpuint (off + NLA_ALIGN (len), <=, size);
      for (gsize i = off + len; i < off + NLA_ALIGN (len); i++)
        {
          cleared += b[i] != 0;
          b[i] = 0;
        }
      off += NLA_ALIGN (len);
    }
  if (cleared)
    g_test_message ("%s: %u byte(s) of attribute padding were not zero", name, cleared);
  return g_bytes_new_take (b, size);
}

/* Captured from iproute2 in the lab host: the family id at offset 4 (the
 * kernel assigns it when the module loads), seq at 8. */
static void
test_vdpa (void)
{
  char buf[VA_NL_BUF_SIZE];
  g_autoptr (GBytes) dev_new = genl_fixture ("vdpa-dev-new");
  g_autoptr (GBytes) dev_del = genl_fixture ("vdpa-dev-del");
  g_autoptr (GBytes) dump = genl_fixture ("vdpa-mgmtdev-dump");

  assert_same (va_nl_build_vdpa_dev_new (buf, (guint16) fixture_u32 (dev_new, 4), fixture_u32 (dev_new, 8), "pci", "0000:3b:00.2",
                                         "va-0000:3b:00.2", mac, 4, 1500),
               dev_new);
  assert_same (va_nl_build_vdpa_dev_del (buf, (guint16) fixture_u32 (dev_del, 4), fixture_u32 (dev_del, 8), "va-0000:3b:00.2"), dev_del);
  assert_same (va_nl_build_vdpa_mgmtdev_dump (buf, (guint16) fixture_u32 (dump, 4), fixture_u32 (dump, 8)), dump);
}

/* Captured from iproute2: seq at offset 8, port ifindex at 20, master at 36. */
static void
test_link_master (void)
{
  char buf[VA_NL_BUF_SIZE];
  g_autoptr (GBytes) up = fixture ("link-master-up");
  g_autoptr (GBytes) nomaster = fixture ("link-nomaster");
  g_autoptr (GBytes) link_up = fixture ("link-up");

  assert_same (va_nl_build_link_master (buf, fixture_u32 (up, 8), (int) fixture_u32 (up, 20), (int) fixture_u32 (up, 36), TRUE), up);
  assert_same (va_nl_build_link_master (buf, fixture_u32 (nomaster, 8), (int) fixture_u32 (nomaster, 20), 0, FALSE), nomaster);
  assert_same (va_nl_build_link_up (buf, fixture_u32 (link_up, 8), (int) fixture_u32 (link_up, 20)), link_up);
}

/* Derived from the uapi layout (make-uapi-fixtures.py): a PCI management
 * device, which the lab host has none of. */
static void
test_vdpa_mgmtdev_reply (void)
{
  g_autoptr (GBytes) reply = fixture ("vdpa-mgmtdev-reply");
  VaVdpaMgmtdev *m = va_nl_parse_vdpa_mgmtdev (g_bytes_get_data (reply, NULL));

  g_assert_nonnull (m);
  g_assert_cmpstr (m->bus, ==, "pci");
  g_assert_cmpstr (m->dev, ==, "0000:3b:00.2");
  va_vdpa_mgmtdev_free (m);
}

/* Captured in the lab host: VDUSE's management device has no bus, and its
 * reply carries attributes the parser skips (supported classes, max
 * supported vqs, supported features). */
static void
test_vdpa_mgmtdev_reply_vduse (void)
{
  g_autoptr (GBytes) reply = fixture ("vdpa-mgmtdev-reply-vduse");
  VaVdpaMgmtdev *m = va_nl_parse_vdpa_mgmtdev (g_bytes_get_data (reply, NULL));

  g_assert_nonnull (m);
  g_assert_null (m->bus);
  g_assert_cmpstr (m->dev, ==, "vduse");
  va_vdpa_mgmtdev_free (m);
}

/* Captured from iproute2 in the lab host: family id at offset 4, seq at 8. */
static void
test_devlink (void)
{
  char buf[VA_NL_BUF_SIZE];
  g_autoptr (GBytes) set = genl_fixture ("devlink-eswitch-switchdev");

  assert_same (va_nl_build_eswitch_set (buf, (guint16) fixture_u32 (set, 4), fixture_u32 (set, 8), "pci", "0000:3b:00.0", 1), set);
}

/* Captured in the lab host against netdevsim (capture-devlink.sh): the
 * devlink handle is netdevsim/netdevsim7, not pci/...; the mode is read with
 * ESWITCH_GET, whose replies are netdevsim's own. */
static void
test_devlink_netdevsim (void)
{
  char buf[VA_NL_BUF_SIZE];
  g_autoptr (GBytes) set = genl_fixture ("devlink-eswitch-set-netdevsim");
  g_autoptr (GBytes) get = genl_fixture ("devlink-eswitch-get-legacy");
  g_autoptr (GBytes) legacy = fixture ("devlink-eswitch-get-legacy-reply");
  g_autoptr (GBytes) switchdev = fixture ("devlink-eswitch-get-switchdev-reply");
  g_autoptr (GBytes) setack = fixture ("devlink-eswitch-set-netdevsim-reply");
  guint16 mode = 99;

  assert_same (va_nl_build_eswitch_set (buf, (guint16) fixture_u32 (set, 4), fixture_u32 (set, 8), "netdevsim", "netdevsim7", 1), set);
  assert_same (va_nl_build_eswitch_get (buf, (guint16) fixture_u32 (get, 4), fixture_u32 (get, 8), "netdevsim", "netdevsim7"), get);
  g_assert_true (va_nl_parse_eswitch_mode (g_bytes_get_data (legacy, NULL), &mode));
  g_assert_cmpuint (mode, ==, 0); /* DEVLINK_ESWITCH_MODE_LEGACY */
  g_assert_true (va_nl_parse_eswitch_mode (g_bytes_get_data (switchdev, NULL), &mode));
  g_assert_cmpuint (mode, ==, 1); /* DEVLINK_ESWITCH_MODE_SWITCHDEV */
  /* an ACK carries no mode */
  g_assert_false (va_nl_parse_eswitch_mode (g_bytes_get_data (setack, NULL), &mode));
}

/* The port dump as iproute2 asks it, and netdevsim's answers: the physical
 * port (flavour 0, its netdev) and a pcivf port (flavour 4) with pfnum,
 * vfnum, external and its representor netdev. */
static void
test_devlink_ports (void)
{
  char buf[VA_NL_BUF_SIZE];
  g_autoptr (GBytes) dump = genl_fixture ("devlink-port-dump");
  g_autoptr (GBytes) phys = fixture ("devlink-port-dump-reply");
  g_autoptr (GBytes) vf = fixture ("devlink-port-get-pcivf-reply");
  VaDevlinkPort *p;

  assert_same (va_nl_build_devlink_port_dump (buf, (guint16) fixture_u32 (dump, 4), fixture_u32 (dump, 8)), dump);

  p = va_nl_parse_devlink_port (g_bytes_get_data (phys, NULL));
  g_assert_nonnull (p);
  g_assert_cmpstr (p->bus, ==, "netdevsim");
  g_assert_cmpstr (p->dev, ==, "netdevsim7");
  g_assert_cmpuint (p->index, ==, 0);
  g_assert_cmpuint (p->flavour, ==, 0); /* DEVLINK_PORT_FLAVOUR_PHYSICAL */
  g_assert_cmpint (p->vfnum, ==, -1);
  g_assert_cmpstr (p->netdev, ==, "eth0");
  va_devlink_port_free (p);

  p = va_nl_parse_devlink_port (g_bytes_get_data (vf, NULL));
  g_assert_nonnull (p);
  g_assert_cmpstr (p->dev, ==, "netdevsim7");
  g_assert_cmpuint (p->index, ==, 129);
  g_assert_cmpuint (p->flavour, ==, 4); /* DEVLINK_PORT_FLAVOUR_PCI_VF */
  g_assert_cmpint (p->pfnum, ==, 0);
  g_assert_cmpint (p->vfnum, ==, 1);
  g_assert_false (p->external);
  g_assert_cmpstr (p->netdev, ==, "eth2");
  va_devlink_port_free (p);
}

/* vdpa dev show: each device names its management device (vdpa_sim_net's
 * has no bus; a VF's is pci/<VF>). */
static void
test_vdpa_dev_dump (void)
{
  char buf[VA_NL_BUF_SIZE];
  g_autoptr (GBytes) dump = genl_fixture ("vdpa-dev-dump");
  g_autoptr (GBytes) reply = fixture ("vdpa-dev-dump-reply");
  VaVdpaDev *d;

  assert_same (va_nl_build_vdpa_dev_dump (buf, (guint16) fixture_u32 (dump, 4), fixture_u32 (dump, 8)), dump);
  d = va_nl_parse_vdpa_dev (g_bytes_get_data (reply, NULL));
  g_assert_nonnull (d);
  g_assert_cmpstr (d->name, ==, "va-sim0");
  g_assert_null (d->mgmt_bus);
  g_assert_cmpstr (d->mgmt_dev, ==, "vdpasim_net");
  va_vdpa_dev_free (d);
}

/* The real kernel: run only where this machine has no vdpa family, and say
 * so otherwise. */
static void
test_no_vdpa_family (void)
{
  g_autoptr (GError) error = NULL;
  guint16 id = 0;

  if (va_nl_genl_family ("vdpa", "vdpa", &id, &error))
    {
      g_test_skip ("this kernel has the vdpa family");
      return;
    }
  g_assert_error (error, VA_ERROR, VA_ERROR_NOT_FOUND);
  g_assert_cmpstr (error->message, ==, "the kernel has no vdpa netlink family (module vdpa not loaded, or kernel built without it)");
  g_clear_error (&error);

  g_assert_false (va_nl_vdpa_dev_new ("pci", "0000:3b:00.2", "va-0000:3b:00.2", mac, 4, 1500, &error));
  g_assert_cmpstr (error->message, ==, "the kernel has no vdpa netlink family (module vdpa not loaded, or kernel built without it)");
}

static void
test_nlctrl_resolves (void)
{
  g_autoptr (GError) error = NULL;
  guint16 id = 0;

  /* the controller resolves itself: the lookup path works for real */
  g_assert_true (va_nl_genl_family ("nlctrl", "genetlink", &id, &error));
  g_assert_no_error (error);
  g_assert_cmpuint (id, ==, 0x10);
}

static int
sh (const char *cmd)
{
  int status = system (cmd);
  return WIFEXITED (status) ? WEXITSTATUS (status) : -1;
}

/* Bridge VLAN membership on a bridge and a veth pair in a network namespace
 * of this test's own. */
static void
test_bridge_vlan_real (void)
{
  g_autoptr (GError) error = NULL;
  g_autofree char *out = NULL;
  gboolean filtering;

  if (geteuid () != 0 || unshare (CLONE_NEWNET) < 0)
    {
      g_test_skip ("needs root for a private network namespace");
      return;
    }
  g_assert_cmpint (sh ("ip link add br0 type bridge && ip link add v0 type veth peer name v1"), ==, 0);
  /* the representor's way into the bridge, then out and back */
  g_assert_true (va_nl_link_set_master ("v0", "br0", &error));
  g_assert_no_error (error);
  g_assert_cmpint (sh ("ip -o link show v0 | grep -q 'master br0' && ip -o link show v0 | grep -q '<.*UP.*>'"), ==, 0);
  g_assert_true (va_nl_link_set_master ("v0", NULL, &error));
  g_assert_no_error (error);
  g_assert_cmpint (sh ("ip -o link show v0 | grep -q master"), ==, 1);
  g_assert_true (va_nl_link_set_master ("ghost0", NULL, &error)); /* gone: out of every bridge */
  g_assert_false (va_nl_link_set_master ("v0", "nobr0", &error));
  g_assert_cmpstr (error->message, ==, "port v0: joining bridge nobr0: no network interface nobr0");
  g_clear_error (&error);
  g_assert_true (va_nl_link_set_master ("v0", "br0", &error));
  filtering = sh ("ip link set br0 type bridge vlan_filtering 1 vlan_default_pvid 0 2>/dev/null") == 0;

  if (!filtering)
    {
      /* this machine: the bridge has no VLAN filtering, and the error says
       * so in one line naming the port and the step */
      g_assert_false (va_nl_bridge_vlan ("v0", TRUE, 2334, TRUE, &error));
      g_assert_error (error, VA_ERROR, VA_ERROR_PROVISIONING_FAILED);
      g_assert_cmpstr (error->message, ==,
                       "bridge port v0: adding VLAN 2334 as untagged PVID: the kernel refused: Operation not supported (is v0 in a "
                       "bridge with vlan_filtering 1, and does the kernel have CONFIG_BRIDGE_VLAN_FILTERING?)");
      g_clear_error (&error);
    }
  else
    {
      g_assert_true (va_nl_bridge_vlan ("v0", TRUE, 2334, TRUE, &error));
      g_assert_no_error (error);
      g_assert_true (va_nl_bridge_vlan_del_absent_ok ("v0", 1, &error)); /* absent already with default_pvid 0 */
      g_assert_no_error (error);
      g_assert_true (g_spawn_command_line_sync ("bridge -j vlan show dev v0", &out, NULL, NULL, &error));
      g_assert_nonnull (strstr (out, "\"vlan\":2334,\"flags\":[\"PVID\",\"Egress Untagged\"]"));
      g_assert_true (va_nl_bridge_vlan ("v0", FALSE, 2334, FALSE, &error));
    }

  g_assert_false (va_nl_bridge_vlan ("ghost0", TRUE, 5, TRUE, &error));
  g_assert_error (error, VA_ERROR, VA_ERROR_NOT_FOUND);
  g_assert_cmpstr (error->message, ==, "bridge port ghost0: adding VLAN 5 as untagged PVID: no network interface ghost0");
}

/* The lab host (tests/lab, issue 7): a real vdpa bus with a VDUSE
 * management device, served by tests/lab/vduse-net (VA_VDUSE_NET). VDUSE's
 * management device has no bus: DEV_NEW with bus "pci" finds nothing. The
 * vdpa device takes the name of the VDUSE device it sits on: VDUSE finds
 * its device by that name. */
static void
die_with_parent (gpointer data)
{
  (void) data;
  prctl (PR_SET_PDEATHSIG, SIGTERM);
}

static void
test_lab_vduse_dev_new_del (void)
{
  const char *vduse_net = g_getenv ("VA_VDUSE_NET");
  const char *name = "va-lab-vduse";
  char buf[VA_NL_BUF_SIZE];
  g_autoptr (GError) error = NULL;
  g_autoptr (GPtrArray) mgmt = NULL;
  g_autofree char *ready = NULL;
  g_autofree char *sysdev = g_strdup_printf ("/sys/bus/vdpa/devices/%s", name);
  gboolean found = FALSE;
  guint16 family = 0;
  GPid pid;
  int status = 0;
  int kerr = 0;

  if (!vduse_net || !g_file_test ("/dev/vduse/control", G_FILE_TEST_EXISTS))
    {
      g_test_skip ("not in the lab host (VA_VDUSE_NET and /dev/vduse/control)");
      return;
    }
  ready = g_strdup_printf ("%s/va-lab-vduse.ready", g_get_tmp_dir ());
  unlink (ready);
  {
    char *argv[] = { (char *) vduse_net, "-n", (char *) name, "-r", ready, NULL };
    /* a failed assertion must not leave it holding our output pipe */
    g_assert_true (g_spawn_async (NULL, argv, NULL, G_SPAWN_DO_NOT_REAP_CHILD | G_SPAWN_STDOUT_TO_DEV_NULL | G_SPAWN_STDERR_TO_DEV_NULL,
                                  die_with_parent, NULL, &pid, &error));
    g_assert_no_error (error);
  }
  for (int i = 0; i < 100 && !g_file_test (ready, G_FILE_TEST_EXISTS); i++)
    g_usleep (50000);
  g_assert_true (g_file_test (ready, G_FILE_TEST_EXISTS));

  /* discovery: the VDUSE management device has no bus */
  mgmt = va_nl_vdpa_mgmtdevs (&error);
  g_assert_no_error (error);
  for (guint i = 0; i < mgmt->len; i++)
    {
      VaVdpaMgmtdev *m = g_ptr_array_index (mgmt, i);
      g_test_message ("mgmtdev %s/%s", m->bus ? m->bus : "(no bus)", m->dev);
      found |= m->bus == NULL && g_strcmp0 (m->dev, "vduse") == 0;
    }
  g_assert_true (found);

  /* as a VF's would be: the kernel finds no such device */
  g_assert_false (va_nl_vdpa_dev_new ("pci", "vduse", name, NULL, 0, 0, &error));
  g_test_message ("va_nl_vdpa_dev_new (\"pci\", \"vduse\"): %s", error->message);
  g_assert_error (error, VA_ERROR, VA_ERROR_PROVISIONING_FAILED);
  g_clear_error (&error);

  g_assert_true (va_nl_genl_family ("vdpa", "vdpa", &family, &error));
  g_assert_no_error (error);
  /* VDUSE takes its MAC, MTU and queue pairs from the device's config
   * space, and refuses them here */
  g_assert_false (va_nl_transact (NETLINK_GENERIC, va_nl_build_vdpa_dev_new (buf, family, 7001, NULL, "vduse", name, mac, 0, 0), NULL, NULL,
                                  "creating a VDUSE vdpa device with a MAC", &kerr, &error));
  g_test_message ("with a MAC: %s (errno %d)", error->message, kerr);
  g_assert_cmpint (kerr, !=, 0);
  g_clear_error (&error);
  g_assert_false (g_file_test (sysdev, G_FILE_TEST_EXISTS));

  g_assert_true (va_nl_vdpa_dev_new (NULL, "vduse", name, NULL, 0, 0, &error));
  g_assert_no_error (error);
  g_assert_true (g_file_test (sysdev, G_FILE_TEST_EXISTS));

  g_assert_true (va_nl_vdpa_dev_del (name, &error));
  g_assert_no_error (error);
  g_assert_false (g_file_test (sysdev, G_FILE_TEST_EXISTS));
  g_assert_true (va_nl_vdpa_dev_del (name, &error)); /* gone already: TRUE */
  g_assert_no_error (error);

  kill (pid, SIGTERM);
  g_assert_cmpint (waitpid (pid, &status, 0), ==, pid);
  g_spawn_close_pid (pid);
  g_assert_true (WIFEXITED (status) && WEXITSTATUS (status) == 0);
  unlink (ready);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/netlink/built/bridge-vlan-as-iproute2", test_bridge_vlan);
  g_test_add_func ("/netlink/built/vf-set-as-iproute2", test_vf_set);
  g_test_add_func ("/netlink/parsed/vf-state", test_vf_state_parsed);
  g_test_add_func ("/netlink/parsed/vf-flags", test_vf_flags_parsed);
  g_test_add_func ("/netlink/built/vdpa-as-iproute2", test_vdpa);
  g_test_add_func ("/netlink/built/link-master-as-iproute2", test_link_master);
  g_test_add_func ("/netlink/parsed/vdpa-mgmtdev-reply", test_vdpa_mgmtdev_reply);
  g_test_add_func ("/netlink/parsed/vdpa-mgmtdev-reply-vduse", test_vdpa_mgmtdev_reply_vduse);
  g_test_add_func ("/netlink/built/devlink-eswitch-as-iproute2", test_devlink);
  g_test_add_func ("/netlink/built/devlink-netdevsim-as-iproute2", test_devlink_netdevsim);
  g_test_add_func ("/netlink/built/devlink-port-dump-as-iproute2", test_devlink_ports);
  g_test_add_func ("/netlink/built/vdpa-dev-dump-as-iproute2", test_vdpa_dev_dump);
  g_test_add_func ("/netlink/kernel/nlctrl-resolves", test_nlctrl_resolves);
  g_test_add_func ("/netlink/kernel/no-vdpa-family", test_no_vdpa_family);
  g_test_add_func ("/netlink/lab/vduse-dev-new-del", test_lab_vduse_dev_new_del);
  /* last: it unshares this process's network namespace */
  g_test_add_func ("/netlink/kernel/bridge-vlan-in-netns", test_bridge_vlan_real);
  return g_test_run ();
}
