/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <glib.h>

#include "va-host-view.h"

G_BEGIN_DECLS

typedef enum
{
  VA_ESWITCH_UNCHANGED,
  VA_ESWITCH_LEGACY,
  VA_ESWITCH_SWITCHDEV,
} VaEswitchMode;

#define VA_ESWITCH_LAST (VA_ESWITCH_SWITCHDEV + 1)

typedef enum
{
  VA_VLAN_METHOD_NONE,
  VA_VLAN_METHOD_VST,
  VA_VLAN_METHOD_BRIDGE,
  VA_VLAN_METHOD_OVS,
} VaVlanMethod;

#define VA_VLAN_METHOD_LAST (VA_VLAN_METHOD_OVS + 1)

typedef enum
{
  VA_POOL_TYPE_CONNECTX,
  /* for tests without ConnectX: VDUSE devices va-SLOT as slots (see
   * va_kernel_pf_is_vduse) */
  VA_POOL_TYPE_VDUSE_TEST,
  VA_POOL_TYPE_NETDEVSIM_TEST, /* the kernel's netdevsim PFs with vdpa_sim_net devices (tests/lab) */
  /* no PF: software devices only (VDUSE and the relay, issue 28), for
   * hosts without a hardware vDPA driver, the demo and the tests */
  VA_POOL_TYPE_SOFTWARE,
} VaPoolType;

#define VA_POOL_TYPE_LAST (VA_POOL_TYPE_SOFTWARE + 1)

/* The most software devices one pool may make: each costs a relay process
 * (up to its memory bound) and CPU per packet. */
#define VA_SOFTWARE_SLOTS_MAX 256
/* The relay's own memory bound, MiB (vdpa-allocator-relay --max-memory). */
#define VA_RELAY_MEMORY_MIB_DEFAULT 64

typedef struct
{
  char *name;
  VaPoolType type;
  VaPoolKind kind;      /* vdpa devices on the VFs, or the VFs passed through */
  char **match_pf;      /* netdev names; NULL: any */
  char **match_pci;     /* PCI addresses; NULL: any */
  guint16 match_vendor; /* 0: any */
  guint16 match_device; /* 0: any */
  guint vfs;            /* 0: leave sriov_numvfs as it is */
  VaEswitchMode eswitch;
  VaVlanMethod vlan_method;
  char *uplink_bridge;
  guint max_vqp;
  guint mtu; /* 0: the device's default */
  guint low_watermark;
  char *device_group; /* group of the /dev/vhost-vdpa-N nodes; default kvm */
  guint device_mode;  /* their mode; default 0660 */
  /* software-slots: how many software vDPA devices the pool may make when
   * it has no free hardware slot (all of them for type=software), for NICs
   * whose network has a fallback bridge; 0: none */
  guint software_slots;
  /* the first network on this pool with a VLAN, and its VLAN (0: none):
   * where that VLAN goes depends on the PF's eswitch mode, which the
   * backend reads at preparation (va-backend-kernel.c) */
  char *vlan_network;
  guint16 vlan_network_vlan;
} VaPoolConfig;

typedef struct
{
  VaNetwork net;
  guint quota;       /* 0: none */
  gboolean spoofchk; /* a passed-through VF's, in legacy mode: default on */
  gboolean trust;    /* likewise: default off */
  /* promote=: its NICs on software vDPA devices move onto hardware by
   * themselves when a hardware slot of the pool frees (issue 28); default
   * off */
  gboolean promote;
} VaNetworkConfig;

typedef struct
{
  char *dir;
  GPtrArray *files;    /* char*, the files read, in order */
  GPtrArray *pools;    /* VaPoolConfig*, sorted by name */
  GPtrArray *networks; /* VaNetworkConfig*, sorted by name */
  gboolean simulate;   /* a [simulate] group selects the simulated NIC */
  guint sim_pfs;
  guint sim_vfs;
  guint sim_numa_nodes;
  char **sim_unhealthy;  /* PF names the simulation reports as down */
  guint hook_timeout_ms; /* [hook] timeout-ms: the whole of a hook call's talk with the daemon */
  /* [hook] swap-back-timeout-s: how long the swap back of a domain that
   * moved here may take, its wait for the incoming migration included */
  guint swap_back_timeout_s;
  char *relay_user;       /* [relay] user: who the relays of software devices run as; default nobody */
  guint relay_memory_mib; /* [relay] max-memory-mib */
} VaConfig;

/* The hook's default budget: four allocations at the worst time measured
 * on the lab tier's real kernel paths (1.0 to 1.3 s with vlan-method=ovs,
 * most of it ovs-vsctl, under TCG: tests/lab/bench_lab_steps.py), with a
 * margin of about 2. */
#define VA_HOOK_TIMEOUT_MS_DEFAULT 10000
#define VA_HOOK_TIMEOUT_MS_MIN 100
#define VA_HOOK_TIMEOUT_MS_MAX 300000

/* an incoming migration of a few GiB under TCG takes tens of seconds */
#define VA_SWAP_BACK_TIMEOUT_S_DEFAULT 300
#define VA_SWAP_BACK_TIMEOUT_S_MAX 3600

#define VA_CONFIG_MAX_FILE_SIZE (1024 * 1024)
#define VA_CONFIG_MAX_FILES 256
#define VA_CONFIG_MAX_GROUPS 4096

/* Reads DIR/vdpa-allocator.conf, then DIR/conf.d/\*.conf in name order; a
 * key in a later file overrides the same key before it. Every error names
 * the file, the group and the key. A missing DIR is VA_ERROR_NOT_FOUND. */
VaConfig *va_config_load (const char *dir, GError **error);
VaConfig *va_config_new_empty (void);
void va_config_free (VaConfig *self);

const VaPoolConfig *va_config_lookup_pool (const VaConfig *self, const char *name);
const VaNetworkConfig *va_config_lookup_network (const VaConfig *self, const char *name);

/* The host view for the intent engine, pools at unknown (unlimited) free
 * capacity. */
VaHostView *va_config_to_host_view (const VaConfig *self, const char *port_root);

VA_ENUM_DECL (va_eswitch_mode, VaEswitchMode)
VA_ENUM_DECL (va_vlan_method, VaVlanMethod)
VA_ENUM_DECL (va_pool_type, VaPoolType)

G_DEFINE_AUTOPTR_CLEANUP_FUNC (VaConfig, va_config_free)

G_END_DECLS
