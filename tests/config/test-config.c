/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The configuration loader: what an operator writes, and every way to get
 * it wrong, each caught with a message naming the file, group and key. */
#include <glib.h>
#include <glib/gstdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "va-config.h"
#include "va-error.h"

typedef struct
{
  char *dir;
} Fixture;

static void
fixture_setup (Fixture *f, gconstpointer data)
{
  g_autoptr (GError) error = NULL;

  f->dir = g_dir_make_tmp ("va-config-XXXXXX", &error);
  g_assert_no_error (error);
}

static void
rm_rf (const char *path)
{
  g_autoptr (GDir) d = g_dir_open (path, 0, NULL);
  const char *name;

  while (d && (name = g_dir_read_name (d)))
    {
      g_autofree char *child = g_build_filename (path, name, NULL);
      if (g_file_test (child, G_FILE_TEST_IS_DIR))
        rm_rf (child);
      else
        g_unlink (child);
    }
  g_rmdir (path);
}

static void
fixture_teardown (Fixture *f, gconstpointer data)
{
  rm_rf (f->dir);
  g_free (f->dir);
}

static char *
write_file (Fixture *f, const char *rel, const char *text)
{
  g_autoptr (GError) error = NULL;
  char *path = g_build_filename (f->dir, rel, NULL);
  g_autofree char *parent = g_path_get_dirname (path);

  g_mkdir_with_parents (parent, 0755);
  g_file_set_contents (path, text, -1, &error);
  g_assert_no_error (error);
  return path;
}

/* The project's first example configuration, verbatim, inline comments and all. */
static const char design_example[] = "[pool cx6-p1]\n"
                                     "match-pf=enp179s0f1          # or match-pci=0000:b3:00.1, match-vendor=15b3, match-device=101d\n"
                                     "vfs=8                        # sriov_numvfs to create when the PF appears\n"
                                     "eswitch=switchdev            # or legacy\n"
                                     "vlan-method=bridge           # vst | bridge | ovs | none\n"
                                     "uplink-bridge=br-accel       # for bridge/ovs\n"
                                     "max-vqp=4\n"
                                     "mtu=1500\n"
                                     "\n"
                                     "[network vpc2]\n"
                                     "mode=vdpa                    # vdpa | virtio | auto\n"
                                     "pool=cx6-p1\n"
                                     "vlan=2334\n"
                                     "fallback-bridge=br-bond0     # the virtio path\n"
                                     "\n"
                                     "[network vpc1]\n"
                                     "mode=virtio\n"
                                     "vlan=2200\n"
                                     "fallback-bridge=br-bond0\n";

static void
test_design_example (Fixture *f, gconstpointer data)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (VaConfig) config = NULL;
  const VaPoolConfig *pool;
  const VaNetworkConfig *vpc1, *vpc2;

  g_free (write_file (f, "vdpa-allocator.conf", design_example));
  config = va_config_load (f->dir, &error);
  g_assert_no_error (error);

  g_assert_cmpuint (config->pools->len, ==, 1);
  pool = va_config_lookup_pool (config, "cx6-p1");
  g_assert_nonnull (pool);
  g_assert_cmpstr (pool->match_pf[0], ==, "enp179s0f1");
  g_assert_null (pool->match_pf[1]);
  g_assert_cmpuint (pool->vfs, ==, 8);
  g_assert_cmpint (pool->eswitch, ==, VA_ESWITCH_SWITCHDEV);
  g_assert_cmpint (pool->vlan_method, ==, VA_VLAN_METHOD_BRIDGE);
  g_assert_cmpstr (pool->uplink_bridge, ==, "br-accel");
  g_assert_cmpuint (pool->max_vqp, ==, 4);
  g_assert_cmpuint (pool->mtu, ==, 1500);
  /* the node of a vDPA device: what libvirt's qemu user can open */
  g_assert_cmpstr (pool->device_group, ==, "kvm");
  g_assert_cmpuint (pool->device_mode, ==, 0660);

  /* sorted by name */
  g_assert_cmpuint (config->networks->len, ==, 2);
  vpc1 = g_ptr_array_index (config->networks, 0);
  vpc2 = g_ptr_array_index (config->networks, 1);
  g_assert_cmpstr (vpc1->net.name, ==, "vpc1");
  g_assert_cmpint (vpc1->net.mode, ==, VA_MODE_VIRTIO);
  g_assert_null (vpc1->net.pool);
  g_assert_cmpuint (vpc1->net.vlan, ==, 2200);
  g_assert_cmpint (vpc1->net.bridge_kind, ==, VA_BRIDGE_LINUX);
  g_assert_cmpstr (vpc2->net.pool, ==, "cx6-p1");
  g_assert_cmpuint (vpc2->net.vlan, ==, 2334);
  g_assert_cmpstr (vpc2->net.bridge, ==, "br-bond0");
  g_assert_false (config->simulate);
}

static void
test_dropins_override (Fixture *f, gconstpointer data)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (VaConfig) config = NULL;
  g_autoptr (VaHostView) view = NULL;
  const VaNetwork *net;

  g_free (write_file (f, "vdpa-allocator.conf", design_example));
  g_free (write_file (f, "conf.d/20-vlan.conf", "[network vpc2]\nvlan=100\n"));
  g_free (write_file (f, "conf.d/10-first.conf", "[network vpc2]\nvlan=50\nfallback-bridge-type=ovs\n"));
  g_free (write_file (f, "conf.d/30-ignored.conf.bak", "[network vpc2]\nvlan=7\n"));
  g_free (write_file (f, "conf.d/40-sim.conf", "[simulate]\npfs=2\nvfs=16\n"));
  config = va_config_load (f->dir, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (config->files->len, ==, 4);

  view = va_config_to_host_view (config, "/ports");
  net = va_host_view_lookup_network (view, "vpc2");
  g_assert_nonnull (net);
  /* conf.d in name order: 20 overrides 10, and 10's other key stays */
  g_assert_cmpuint (net->vlan, ==, 100);
  g_assert_cmpint (net->bridge_kind, ==, VA_BRIDGE_OVS);
  g_assert_true (config->simulate);
  g_assert_cmpuint (config->sim_pfs, ==, 2);
  g_assert_cmpuint (config->sim_vfs, ==, 16);
  g_assert_true (va_host_view_has_pool (view, "cx6-p1"));
  g_assert_cmpint (va_host_view_get_pool_free (view, "cx6-p1"), <, 0);
}

static void
test_device_permissions (Fixture *f, gconstpointer data)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (VaConfig) config = NULL;
  const VaPoolConfig *pool;

  g_free (write_file (f, "vdpa-allocator.conf", "[pool a]\ndevice-group=libvirt-qemu\ndevice-mode=0640\n"));
  config = va_config_load (f->dir, &error);
  g_assert_no_error (error);
  pool = va_config_lookup_pool (config, "a");
  g_assert_cmpstr (pool->device_group, ==, "libvirt-qemu");
  g_assert_cmpuint (pool->device_mode, ==, 0640);
}

/* kind= keeps a VF to one use; auto takes either kind, and sriov like vdpa
 * may go without a fallback bridge. */
static void
test_pool_kinds (Fixture *f, gconstpointer data)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (VaConfig) config = NULL;
  g_autoptr (VaHostView) view = NULL;
  const VaNetwork *net;

  g_free (write_file (f, "vdpa-allocator.conf",
                      "[pool cx6]\nmax-vqp=4\n"
                      "[pool cx5]\nkind=sriov   # VFs passed through\neswitch=legacy\nvlan-method=vst\n"
                      "[pool cx7]\nkind=vdpa\n"
                      "[network sr]\nmode=sriov\npool=cx5\nvlan=2334\n"
                      "[network sr-auto]\nmode=auto\npool=cx5\nvlan=100\nfallback-bridge=br0\nspoofchk=false\ntrust=true\n"
                      "[network vd-auto]\nmode=auto\npool=cx7\nfallback-bridge=br0\n"
                      "[network vd]\nmode=vdpa\npool=cx6\n"
                      "[network sr-fo]\nmode=sriov\npool=cx5\nvlan=2334\nfallback-bridge=br0\nfailover=true\n"
                      "[network sr-nofo]\nmode=sriov\npool=cx5\nfallback-bridge=br0\nfailover=false\n"
                      "[pool soft]\nsoftware-slots=2\n"
                      "[network promo]\nmode=auto\npool=soft\nfallback-bridge=br0\npromote=true\n"));
  config = va_config_load (f->dir, &error);
  g_assert_no_error (error);
  g_assert_cmpint (va_config_lookup_pool (config, "cx6")->kind, ==, VA_POOL_KIND_VDPA); /* the default */
  g_assert_cmpint (va_config_lookup_pool (config, "cx5")->kind, ==, VA_POOL_KIND_SRIOV);
  g_assert_cmpint (va_config_lookup_pool (config, "cx7")->kind, ==, VA_POOL_KIND_VDPA);
  /* a passed-through VF's MAC filter: on and untrusted unless said */
  g_assert_true (va_config_lookup_network (config, "sr")->spoofchk);
  g_assert_false (va_config_lookup_network (config, "sr")->trust);
  g_assert_false (va_config_lookup_network (config, "sr-auto")->spoofchk);
  g_assert_true (va_config_lookup_network (config, "sr-auto")->trust);
  /* promote: asked for, never the default */
  g_assert_true (va_config_lookup_network (config, "promo")->promote);
  g_assert_false (va_config_lookup_network (config, "vd-auto")->promote);
  /* failover: asked for, never the default */
  g_assert_true (va_config_lookup_network (config, "sr-fo")->net.failover);
  g_assert_false (va_config_lookup_network (config, "sr-nofo")->net.failover);
  g_assert_false (va_config_lookup_network (config, "sr")->net.failover);
  g_assert_null (va_config_lookup_network (config, "ghost"));
  /* the first network with a VLAN on each pool, for the eswitch check */
  g_assert_cmpstr (va_config_lookup_pool (config, "cx5")->vlan_network, ==, "sr");
  g_assert_cmpuint (va_config_lookup_pool (config, "cx5")->vlan_network_vlan, ==, 2334);
  g_assert_null (va_config_lookup_pool (config, "cx7")->vlan_network);

  view = va_config_to_host_view (config, "/ports");
  g_assert_cmpint (va_host_view_get_pool_kind (view, "cx5"), ==, VA_POOL_KIND_SRIOV);
  g_assert_cmpint (va_host_view_get_pool_kind (view, "cx6"), ==, VA_POOL_KIND_VDPA);
  g_assert_cmpuint (va_host_view_get_pool_max_vqp (view, "cx6"), ==, 4);
  g_assert_cmpuint (va_host_view_get_pool_max_vqp (view, "cx5"), ==, 0);
  net = va_host_view_lookup_network (view, "sr");
  g_assert_cmpint (net->mode, ==, VA_MODE_SRIOV);
  g_assert_cmpuint (net->vlan, ==, 2334);
  g_assert_null (net->bridge);
  g_assert_cmpint (va_host_view_lookup_network (view, "sr-auto")->mode, ==, VA_MODE_AUTO);
  /* the engine sees it: the failover form is the host view's to decide */
  g_assert_true (va_host_view_lookup_network (view, "sr-fo")->failover);
  g_assert_false (va_host_view_lookup_network (view, "sr-nofo")->failover);
  g_assert_true (va_host_view_set_pool_kind (view, "cx6", VA_POOL_KIND_SRIOV, &error));
  g_assert_cmpint (va_host_view_get_pool_kind (view, "cx6"), ==, VA_POOL_KIND_SRIOV);
  g_assert_false (va_host_view_set_pool_kind (view, "ghost", VA_POOL_KIND_SRIOV, &error));
  g_assert_error (error, VA_ERROR, VA_ERROR_NO_SUCH_POOL);
}

static void
test_vduse_pool_type (Fixture *f, gconstpointer data)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (VaConfig) config = NULL;

  g_free (write_file (f, "vdpa-allocator.conf",
                      "[pool lab]\ntype=vduse-test\nvlan-method=bridge\nuplink-bridge=br-lab\n[pool cx]\nmatch-vendor=15b3\n"));
  config = va_config_load (f->dir, &error);
  g_assert_no_error (error);
  g_assert_cmpint (va_config_lookup_pool (config, "lab")->type, ==, VA_POOL_TYPE_VDUSE_TEST);
  g_assert_cmpint (va_config_lookup_pool (config, "cx")->type, ==, VA_POOL_TYPE_CONNECTX);
  g_assert_cmpstr (va_pool_type_to_string (VA_POOL_TYPE_VDUSE_TEST), ==, "vduse-test");
}

/* Software devices (issue 28): a software-only pool, a hardware pool with
 * software slots beside its VFs, and who the relays run as. */
static void
test_software_pools (Fixture *f, gconstpointer data)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (VaConfig) config = NULL;
  g_autoptr (VaConfig) empty = va_config_new_empty ();

  g_free (write_file (f, "vdpa-allocator.conf",
                      "[relay]\nuser=vdpa-relay\nmax-memory-mib=32\n[pool sw]\ntype=software\nsoftware-slots=4\n"
                      "[pool cx]\nmatch-vendor=15b3\nsoftware-slots=2\n[pool plain]\nmatch-vendor=15b3\n"));
  config = va_config_load (f->dir, &error);
  g_assert_no_error (error);
  g_assert_cmpint (va_config_lookup_pool (config, "sw")->type, ==, VA_POOL_TYPE_SOFTWARE);
  g_assert_cmpuint (va_config_lookup_pool (config, "sw")->software_slots, ==, 4);
  g_assert_cmpuint (va_config_lookup_pool (config, "cx")->software_slots, ==, 2);
  g_assert_cmpuint (va_config_lookup_pool (config, "plain")->software_slots, ==, 0);
  g_assert_cmpstr (config->relay_user, ==, "vdpa-relay");
  g_assert_cmpuint (config->relay_memory_mib, ==, 32);
  g_assert_cmpstr (empty->relay_user, ==, "nobody");
  g_assert_cmpuint (empty->relay_memory_mib, ==, VA_RELAY_MEMORY_MIB_DEFAULT);
}

static void
test_hook_timeout (Fixture *f, gconstpointer data)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (VaConfig) config = NULL;
  g_autoptr (VaConfig) empty = va_config_new_empty ();

  g_free (write_file (f, "vdpa-allocator.conf", "[pool a]\n"));
  config = va_config_load (f->dir, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (config->hook_timeout_ms, ==, VA_HOOK_TIMEOUT_MS_DEFAULT);
  g_assert_cmpuint (empty->hook_timeout_ms, ==, VA_HOOK_TIMEOUT_MS_DEFAULT);
  g_clear_pointer (&config, va_config_free);
  g_free (write_file (f, "conf.d/10-hook.conf", "[hook]\ntimeout-ms=30000\n"));
  config = va_config_load (f->dir, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (config->hook_timeout_ms, ==, 30000);
}

static void
test_missing_dir (Fixture *f, gconstpointer data)
{
  g_autoptr (GError) error = NULL;
  g_autofree char *missing = g_build_filename (f->dir, "nope", NULL);
  g_autoptr (VaConfig) config = va_config_load (missing, &error);

  g_assert_null (config);
  g_assert_error (error, VA_ERROR, VA_ERROR_NOT_FOUND);
}

typedef struct
{
  const char *text;
  const char *message; /* after "<file>: " */
} BadCase;

static const BadCase bad_cases[] = {
  { "[pool a]\nvfs=lots\n", "[pool a] vfs: 'lots' is not a number from 0 to 1024" },
  { "[pool a]\nvfs=2000\n", "[pool a] vfs: '2000' is not a number from 0 to 1024" },
  { "[pool a]\ncolour=blue\n", "[pool a] colour: unknown key" },
  { "[pool a]\neswitch=hybrid\n", "[pool a] eswitch: 'hybrid' is not legacy or switchdev" },
  { "[pool a]\nvlan-method=magic\n", "[pool a] vlan-method: 'magic' is not vst, bridge, ovs or none" },
  { "[pool a]\nvlan-method=bridge\n", "[pool a] vlan-method: bridge needs uplink-bridge" },
  { "[pool a]\nvlan-method=vst\neswitch=switchdev\n",
    "[pool a] vlan-method: vst sets the VLAN on the PF, which works only with eswitch=legacy" },
  { "[pool a]\ntype=bluefield\n", "[pool a] type: 'bluefield' is not connectx, software, vduse-test or netdevsim-test" },
  { "[pool a]\ntype=netdevsim-test\nmatch-pci=0000:b3:00.1\n",
    "[pool a] type: netdevsim-test takes PFs by match-pf only (netdevsim devices have no PCI address)" },
  { "[pool a]\ntype=vduse-test\nmatch-pf=eth0\n",
    "[pool a] type: vduse-test takes no match-* keys (the pool takes the VDUSE devices named va-*)" },
  { "[pool a]\ntype=vduse-test\nvfs=4\n", "[pool a] type: vduse-test takes no vfs" },
  { "[pool a]\ntype=vduse-test\neswitch=legacy\n", "[pool a] type: vduse-test takes no eswitch" },
  { "[pool a]\ntype=vduse-test\nvlan-method=vst\n", "[pool a] type: vduse-test takes no vlan-method=vst (there is no PF to tag)" },
  { "[pool a]\ntype=vduse-test\nmtu=9000\n", "[pool a] type: vduse-test takes no mtu (VDUSE devices refuse it)" },
  { "[pool a]\ntype=vduse-test\nmax-vqp=2\n", "[pool a] type: vduse-test takes no max-vqp other than 1 (VDUSE devices refuse it)" },
  { "[pool a]\nmatch-pci=0000:b3:00\n", "[pool a] match-pci: '0000:b3:00' is not a PCI address like 0000:b3:00.1" },
  { "[pool a]\nmatch-pf=this-name-is-far-too-long\n", "[pool a] match-pf: 'this-name-is-far-too-long' is not a network interface name" },
  { "[pool a]\nmatch-vendor=zz\n", "[pool a] match-vendor: 'zz' is not a 16-bit hexadecimal id" },
  { "[pool a]\nmax-vqp=0\n", "[pool a] max-vqp: '0' is not a number from 1 to 256" },
  { "[pool a]\nmtu=9999\n", "[pool a] mtu: '9999' is not a number from 68 to 9216" },
  { "[pool a]\nmtu=1400\n", "[pool a] mtu: 1400 is below 1500: libvirt gives a vdpa NIC's guest no MTU (it refuses <mtu> there), so "
                            "the guest sends 1500-byte frames, which the VF would drop" },
  { "[pool a]\ndevice-group=\n", "[pool a] device-group: '' is not a group name or number" },
  { "[pool a]\ndevice-group=qemu users\n", "[pool a] device-group: 'qemu users' is not a group name or number" },
  { "[pool a]\ndevice-mode=rw\n", "[pool a] device-mode: 'rw' is not an octal mode from 0 to 0777" },
  { "[pool a]\ndevice-mode=01660\n", "[pool a] device-mode: '01660' is not an octal mode from 0 to 0777" },
  { "[pool a]\ndevice-mode=0666\n",
    "[pool a] device-mode: '0666' gives other users access to the device; at most group access (like 0660)" },
  { "[pool a/b]\n", "[pool a/b]: 'a/b' is not a valid pool name" },
  { "[pool a]\nkind=both\n", "[pool a] kind: 'both' is not vdpa or sriov" },
  { "[pool a]\nkind=sriov\nmax-vqp=4\n", "[pool a] max-vqp: for vDPA devices only: a kind=sriov pool passes whole VFs through" },
  { "[pool a]\ndevice-group=kvm\nkind=sriov\n",
    "[pool a] device-group: for vDPA devices only: a kind=sriov pool passes whole VFs through" },
  { "[pool a]\nkind=sriov\ndevice-mode=0600\n", "[pool a] device-mode: for vDPA devices only: a kind=sriov pool passes whole VFs through" },
  { "[pool a]\ntype=vduse-test\nkind=sriov\n", "[pool a] kind: sriov passes PCI VFs through, and a vduse-test pool has none" },
  { "[pool a]\nkind=sriov\ntype=netdevsim-test\n", "[pool a] kind: sriov passes PCI VFs through, and a netdevsim-test pool has none" },
  { "[network n]\nmode=sriov\n", "[network n] pool: missing, and mode=sriov needs one" },
  { "[network n]\nmode=sriov\npool=a\n[pool a]\n", "[network n] pool: mode=sriov needs a pool of kind sriov, and 'a' is kind vdpa" },
  { "[network n]\nmode=vdpa\npool=a\n[pool a]\nkind=sriov\n",
    "[network n] pool: mode=vdpa needs a pool of kind vdpa, and 'a' is kind sriov" },
  { "[network n]\nmode=auto\npool=a\n[pool a]\nkind=sriov\n", "[network n] fallback-bridge: missing, and mode=auto needs one" },
  { "[network n]\nmode=sriov\npool=a\nspoofchk=yes\n[pool a]\nkind=sriov\n", "[network n] spoofchk: 'yes' is not true or false" },
  { "[network n]\nmode=sriov\npool=a\nfallback-bridge=br0\nfailover=on\n[pool a]\nkind=sriov\n",
    "[network n] failover: 'on' is not true or false" },
  /* failover: a VF and its virtio standby, which needs a bridge */
  { "[network n]\nmode=sriov\npool=a\nfailover=true\n[pool a]\nkind=sriov\n",
    "[network n] failover: the virtio standby goes on fallback-bridge, which this network lacks" },
  { "[network n]\nmode=auto\npool=a\nfallback-bridge=br0\nfailover=true\n[pool a]\nkind=sriov\n",
    "[network n] failover: pairs a passed-through VF with a virtio standby: mode=sriov only, and this network is mode=auto" },
  { "[network n]\nmode=vdpa\npool=a\nfallback-bridge=br0\nfailover=true\n[pool a]\n",
    "[network n] failover: pairs a passed-through VF with a virtio standby: mode=sriov only, and this network is mode=vdpa" },
  { "[network n]\nmode=virtio\nfallback-bridge=br0\nfailover=true\n",
    "[network n] failover: pairs a passed-through VF with a virtio standby: mode=sriov only, and this network is mode=virtio" },
  /* promotion: from a pool's software devices onto its hardware */
  { "[network n]\nmode=vdpa\npool=a\nfallback-bridge=br0\npromote=yes\n[pool a]\nsoftware-slots=1\n",
    "[network n] promote: 'yes' is not true or false" },
  { "[network n]\nmode=vdpa\npool=a\nfallback-bridge=br0\npromote=true\n[pool a]\n",
    "[network n] promote: moves NICs from software vDPA devices onto hardware ones of the same pool, and pool 'a' makes no software "
    "devices (software-slots=)" },
  { "[network n]\nmode=vdpa\npool=a\nfallback-bridge=br0\npromote=true\n[pool a]\ntype=software\nsoftware-slots=1\n",
    "[network n] promote: moves NICs from software vDPA devices onto hardware ones of the same pool, and pool 'a' has no hardware "
    "(type=software)" },
  { "[network n]\nmode=sriov\npool=a\nfallback-bridge=br0\npromote=true\n[pool a]\nkind=sriov\n",
    "[network n] promote: moves NICs from software vDPA devices onto hardware ones of the same pool, and pool 'a' is not kind=vdpa" },
  { "[network n]\nmode=virtio\nfallback-bridge=br0\npromote=true\n",
    "[network n] promote: moves NICs from software vDPA devices onto hardware ones of the same pool, and this network has no pool" },
  /* mlx5 in switchdev refuses a VF VLAN through the PF (esw/legacy.c) */
  { "[network n]\nmode=sriov\npool=a\nvlan=100\n[pool a]\nkind=sriov\neswitch=switchdev\n",
    "[network n] vlan: pool 'a' is kind=sriov with eswitch=switchdev, where the PF takes no VF VLAN: give it vlan-method=bridge or "
    "ovs (and uplink-bridge)" },
  /* igb takes VLAN 4095 for a VF: the range is ours to check */
  { "[network n]\nmode=sriov\npool=a\nvlan=4095\n[pool a]\nkind=sriov\n", "[network n] vlan: '4095' is not a number from 1 to 4094" },
  { "[network n]\npool=a\n", "[network n] mode: missing (vdpa, sriov, virtio or auto)" },
  { "[network n]\nmode=fast\n", "[network n] mode: 'fast' is not vdpa, sriov, virtio or auto" },
  { "[network n]\nmode=vdpa\n", "[network n] pool: missing, and mode=vdpa needs one" },
  { "[network n]\nmode=auto\npool=a\n[pool a]\n", "[network n] fallback-bridge: missing, and mode=auto needs one" },
  { "[network n]\nmode=virtio\n", "[network n] fallback-bridge: missing, and mode=virtio needs one" },
  { "[network n]\nmode=virtio\nfallback-bridge=br0\npool=a\n[pool a]\n", "[network n] pool: mode=virtio uses no pool" },
  { "[network n]\nmode=vdpa\npool=ghost\n", "[network n] pool: no pool named 'ghost'" },
  { "[network n]\nmode=virtio\nfallback-bridge=br0\nvlan=4095\n", "[network n] vlan: '4095' is not a number from 1 to 4094" },
  { "[network n]\nmode=virtio\nfallback-bridge=br0\nvlan=0\n", "[network n] vlan: '0' is not a number from 1 to 4094" },
  { "[network n]\nmode=virtio\nfallback-bridge=br0\nfallback-bridge-type=vde\n",
    "[network n] fallback-bridge-type: 'vde' is not linux or ovs" },
  { "[simulate]\npfs=0\n", "[simulate] pfs: '0' is not a number from 1 to 64" },
  { "[hook]\ntimeout-ms=99\n", "[hook] timeout-ms: '99' is not a number from 100 to 300000" },
  { "[hook]\ntimeout-ms=2s\n", "[hook] timeout-ms: '2s' is not a number from 100 to 300000" },
  { "[hook]\ntimeout=2\n", "[hook] timeout: unknown key" },
  { "[pool a]\ntype=software\n", "[pool a] type: software takes no software-slots 0 (it has no other slots): give it software-slots=N" },
  { "[pool a]\ntype=software\nsoftware-slots=1\nmatch-pf=p0\n", "[pool a] type: software takes no match-* keys (it takes no PF)" },
  { "[pool a]\ntype=software\nsoftware-slots=1\nmax-vqp=2\n",
    "[pool a] type: software takes no max-vqp other than 1 (VDUSE serves one queue pair)" },
  { "[pool a]\nsoftware-slots=257\n", "[pool a] software-slots: '257' is not a number from 0 to 256" },
  { "[pool a]\nkind=sriov\nsoftware-slots=1\n",
    "[pool a] software-slots: a kind=sriov pool passes VFs through, and a software device is no VF" },
  { "[relay]\nuser=root\n", "[relay] user: a relay serves a guest's rings: never as root" },
  { "[relay]\nuser=0\n", "[relay] user: a relay serves a guest's rings: never as root" },
  { "[relay]\nuser=a b\n", "[relay] user: 'a b' is not a user name or number" },
  { "[relay]\ngroup=x\n", "[relay] group: unknown key" },
  { "[daemon]\n", "[daemon]: unknown group (pool NAME, network NAME, hook, relay or simulate)" },
};

static void
test_bad_values (Fixture *f, gconstpointer data)
{
  for (guint i = 0; i < G_N_ELEMENTS (bad_cases); i++)
    {
      g_autoptr (GError) error = NULL;
      g_autoptr (VaConfig) config = NULL;
      g_autofree char *path = write_file (f, "vdpa-allocator.conf", bad_cases[i].text);
      g_autofree char *expected = g_strdup_printf ("%s: %s", path, bad_cases[i].message);

      config = va_config_load (f->dir, &error);
      g_assert_null (config);
      g_assert_error (error, VA_ERROR, VA_ERROR_INVALID_CONFIG);
      g_assert_cmpstr (error->message, ==, expected);
      g_assert_null (strchr (error->message, '\n'));
    }
}

static void
test_error_names_dropin (Fixture *f, gconstpointer data)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (VaConfig) config = NULL;
  g_autofree char *dropin = NULL;
  g_autofree char *expected = NULL;

  g_free (write_file (f, "vdpa-allocator.conf", design_example));
  dropin = write_file (f, "conf.d/50-typo.conf", "[network vpc2]\nvlan=twenty\n");
  expected = g_strdup_printf ("%s: [network vpc2] vlan: 'twenty' is not a number from 1 to 4094", dropin);
  config = va_config_load (f->dir, &error);
  g_assert_null (config);
  g_assert_cmpstr (error->message, ==, expected);
}

static void
test_syntax_and_size (Fixture *f, gconstpointer data)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (VaConfig) config = NULL;
  g_autofree char *path = write_file (f, "vdpa-allocator.conf", "[pool a\nvfs=1\n");
  g_autoptr (GString) huge = g_string_new ("[pool a]\n");

  config = va_config_load (f->dir, &error);
  g_assert_null (config);
  g_assert_error (error, VA_ERROR, VA_ERROR_INVALID_CONFIG);
  g_assert_true (g_str_has_prefix (error->message, path));
  g_clear_error (&error);

  while (huge->len <= VA_CONFIG_MAX_FILE_SIZE)
    g_string_append (huge, "# padding padding padding padding padding padding\n");
  g_free (write_file (f, "vdpa-allocator.conf", huge->str));
  config = va_config_load (f->dir, &error);
  g_assert_null (config);
  g_assert_error (error, VA_ERROR, VA_ERROR_INVALID_CONFIG);
  g_assert_nonnull (strstr (error->message, "over the limit"));
}

static void
test_empty_dir (Fixture *f, gconstpointer data)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (VaConfig) config = va_config_load (f->dir, &error);

  g_assert_no_error (error);
  g_assert_cmpuint (config->pools->len, ==, 0);
  g_assert_cmpuint (config->networks->len, ==, 0);
  g_assert_cmpuint (config->files->len, ==, 0);
}

static void
test_repeats_in_one_file (Fixture *f, gconstpointer data)
{
  static const struct
  {
    const char *text;
    const char *message; /* after "PATH:" */
  } cases[] = {
    { "[network vpc2]\nvlan=10\n\n[network vpc2]\nvlan=20\n", "4: [network vpc2] is written twice in this file" },
    { "[network vpc2]\nmode=virtio\nvlan=10\n# again\nvlan = 20\n", "5: [network vpc2] vlan is set twice in this file" },
    /* GKeyFile's own refusals, with the line it does not name, in our
     * words (issue 26, point 9) */
    { "[pool a]\nmatch-vendor=15b3\n\n[network n\nmode=vdpa\n", "4: '[network n' is not a group header: write [NAME] alone on its line" },
    { "# a comment\nvlan=10\n", "2: 'vlan=10' comes before any [group]: every key belongs to a group, such as [network NAME]" },
    { "[network n]\nmode=vdpa\npool cx6-p1\n", "3: 'pool cx6-p1' is neither key=value, a [group] nor a # comment" },
  };

  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autoptr (GError) error = NULL;
      g_autoptr (VaConfig) config = NULL;
      g_autofree char *path = write_file (f, "vdpa-allocator.conf", cases[i].text);
      g_autofree char *expected = g_strdup_printf ("%s:%s", path, cases[i].message);

      config = va_config_load (f->dir, &error);
      g_assert_null (config);
      g_assert_error (error, VA_ERROR, VA_ERROR_INVALID_CONFIG);
      g_assert_cmpstr (error->message, ==, expected);
    }
}

/* Unreadable is an error naming the path, never "absent": as an
 * unprivileged user, since root reads everything. */
static void
test_unreadable (Fixture *f, gconstpointer data)
{
  g_autofree char *path = write_file (f, "vdpa-allocator.conf", "[network a]\nmode=virtio\nvlan=5\nfallback-bridge=br0\n");
  g_autofree char *dropins = g_build_filename (f->dir, "conf.d", NULL);
  const struct
  {
    const char *dir;
    const char *denied; /* the path the message must name */
  } cases[] = {
    { f->dir, path },    /* the directory can be listed, not entered */
    { f->dir, dropins }, /* conf.d can't be read */
  };

  if (getuid () != 0)
    {
      g_test_skip ("needs root, to run the check as another user");
      return;
    }
  g_assert_cmpint (g_mkdir (dropins, 0700), ==, 0);
  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      int status;
      pid_t pid;

      g_assert_cmpint (chmod (f->dir, i == 0 ? 0744 : 0755), ==, 0);
      pid = fork ();
      g_assert_cmpint (pid, >=, 0);
      if (pid == 0)
        {
          g_autoptr (GError) error = NULL;
          g_autoptr (VaConfig) config = NULL;

          if (setgid (65534) < 0 || setuid (65534) < 0)
            _exit (3);
          config = va_config_load (cases[i].dir, &error);
          if (config || !g_error_matches (error, VA_ERROR, VA_ERROR_INVALID_CONFIG) || !strstr (error->message, cases[i].denied)
              || !strstr (error->message, "Permission denied"))
            {
              g_printerr ("case %u: %s\n", i, error ? error->message : "loaded");
              _exit (1);
            }
          _exit (0);
        }
      g_assert_cmpint (waitpid (pid, &status, 0), ==, pid);
      g_assert_true (WIFEXITED (status));
      g_assert_cmpint (WEXITSTATUS (status), ==, 0);
    }
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
#define ADD(path, fn) g_test_add (path, Fixture, NULL, fixture_setup, fn, fixture_teardown)
  ADD ("/config/design-example", test_design_example);
  ADD ("/config/dropins-override-in-name-order", test_dropins_override);
  ADD ("/config/device-group-and-mode", test_device_permissions);
  ADD ("/config/pool-kinds", test_pool_kinds);
  ADD ("/config/vduse-pool-type", test_vduse_pool_type);
  ADD ("/config/software-pools", test_software_pools);
  ADD ("/config/hook-timeout", test_hook_timeout);
  ADD ("/config/missing-dir", test_missing_dir);
  ADD ("/config/empty-dir", test_empty_dir);
  ADD ("/config/bad-values-name-file-group-key", test_bad_values);
  ADD ("/config/error-names-the-dropin", test_error_names_dropin);
  ADD ("/config/syntax-and-size", test_syntax_and_size);
  ADD ("/config/repeats-in-one-file", test_repeats_in_one_file);
  ADD ("/config/unreadable-is-an-error", test_unreadable);
  return g_test_run ();
}
