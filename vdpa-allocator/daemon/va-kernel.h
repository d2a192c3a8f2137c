/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <glib.h>

#include "va-pf-health.h"

G_BEGIN_DECLS

/* What the kernel shows of ConnectX NICs (libudev, sysfs), and the sysfs
 * steps of provisioning. No netlink here: see va-netlink.h. Every error is
 * one line naming the device and the step. */

typedef struct
{
  guint16 device;
  const char *name;
  gboolean is_vf;
  gboolean vdpa; /* has the virtio queue object mlx5_vdpa needs */
} VaKernelModel;

typedef enum
{
  VA_KERNEL_ESWITCH_UNKNOWN,
  VA_KERNEL_ESWITCH_LEGACY,
  VA_KERNEL_ESWITCH_SWITCHDEV,
} VaKernelEswitch;

/* How discovery asks devlink (va-netlink.c's by default). The build
 * machines' kernel has no devlink family: the testbed tests give their own,
 * fed from what netdevsim answered (tests/kernel/netlink). */
typedef struct
{
  gboolean (*eswitch_get) (const char *bus, const char *dev, gboolean *switchdev, GError **error);
  gboolean (*eswitch_set) (const char *bus, const char *dev, gboolean switchdev, GError **error);
  GPtrArray *(*ports) (GError **error);    /* VaDevlinkPort* */
  GPtrArray *(*mgmtdevs) (GError **error); /* VaVdpaMgmtdev*: vdpa's, asked here too */
  /* and the VF settings through the PF (rtnetlink), which the testbeds
   * record: MAC and VLAN; the same with spoofchk on and trust off
   * (@flags); spoofchk and trust alone, read back */
  gboolean (*vf_get) (const char *pf, guint32 vf, guint8 mac[6], guint16 *vlan, GError **error);
  gboolean (*vf_set) (const char *pf, guint32 vf, const guint8 mac[6], guint16 vlan, gboolean flags, GError **error);
  gboolean (*vf_set_flags) (const char *pf, guint32 vf, gboolean spoofchk, gboolean trust, GError **error);
  /* and a VF's host driver let go (sysfs driver/unbind), which a testbed
   * cannot carry out by itself */
  gboolean (*vf_unbind) (const char *vf, GError **error);
} VaKernelDevlink;

/* NULL: back to va-netlink.c's. */
void va_kernel_set_devlink (const VaKernelDevlink *ops);

typedef struct
{
  char *pci;         /* VF PCI address; for VDUSE, the slot */
  guint index;       /* N of the PF's virtfnN */
  char *netdev;      /* the VF's own netdev while bound to mlx5_core; NULL otherwise */
  char *reason;      /* why it cannot carry vDPA (no management device); NULL when it can, or when unknown */
  char *representor; /* switchdev: the netdev of the PF's devlink port of flavour pcivf and this vfnum; NULL otherwise */
} VaKernelVf;

typedef struct
{
  char *pci;
  char *syspath; /* as libudev names it: /sys/devices/... */
  guint16 vendor;
  guint16 device;
  const VaKernelModel *model;
  char *netdev; /* NULL: no netdev (driver not bound) */
  int ifindex;  /* 0: unknown */
  int numa_node;
  char *operstate;
  gboolean carrier;
  char *switch_id;   /* phys_switch_id: mlx5 and netdevsim show it in legacy mode too */
  char *devlink_bus; /* the PF's devlink instance: "pci" and its address */
  char *devlink_dev;
  VaKernelEswitch eswitch; /* as devlink ESWITCH_GET says */
  char *eswitch_error;     /* why eswitch is UNKNOWN; NULL otherwise */
  gboolean no_devlink;     /* UNKNOWN because there is no devlink (family or instance): legacy SR-IOV only */
  gboolean not_manager;    /* UNKNOWN because the PF is not its eswitch manager (a BlueField in DPU mode) */
  gboolean admin_up;       /* the uplink's IFF_UP */
  guint numvfs;
  guint totalvfs;
  GPtrArray *vfs;        /* VaKernelVf*, by index */
  char *reason;          /* why the PF cannot serve a kind=vdpa pool; NULL when it can */
  char *sriov_reason;    /* why it cannot serve a kind=sriov pool (VFs passed through); NULL when it can */
  VaPfHealth code;       /* reason as a fixed word; OK when NULL */
  VaPfHealth sriov_code; /* sriov_reason as a fixed word */
} VaKernelPf;

void va_kernel_pf_free (VaKernelPf *pf);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (VaKernelPf, va_kernel_pf_free)

/* The ConnectX model of a 15b3 device id; NULL when not in the table. */
const VaKernelModel *va_kernel_model_lookup (guint16 device);

/* Every ConnectX PF present now (vendor 0x15b3, a PF id of the table),
 * and every other PCI network function with sriov_totalvfs > 0 (an SR-IOV
 * PF of any vendor, e.g. Intel igb: only kind=sriov pools take those, see
 * va_kernel_pf_is_connectx), sorted by PCI address, with its VFs and their
 * representors; then, while the vduse module is loaded, the VDUSE test PF. */
GPtrArray *va_kernel_discover (GError **error);

/* A ConnectX PF of the model table (or a test PF); FALSE for another
 * vendor's SR-IOV PF, which carries no vDPA. */
gboolean va_kernel_pf_is_connectx (const VaKernelPf *pf);

/* The VDUSE test PF (pool type vduse-test, for hosts without ConnectX such
 * as the lab host of tests/lab): its "VFs" are the VDUSE devices named
 * va-SLOT that a userspace server made, its management device the bus-less
 * "vduse"; a netdev named SLOT stands in for a slot's representor. */
#define VA_KERNEL_VDUSE_PF "vduse"
gboolean va_kernel_pf_is_vduse (const VaKernelPf *pf);

/* A netdevsim PF (pool type netdevsim-test; tests/lab, on the kernel's own
 * simulators): device netdevsimN, devlink netdevsim/netdevsimN, slots
 * named netdevsimNvI after its VFs (which are no devices), their vdpa
 * devices made on vdpa_sim_net's bus-less management device. Everything
 * else takes the ConnectX paths. */
#define VA_KERNEL_NETDEVSIM_MGMTDEV "vdpasim_net"
gboolean va_kernel_pf_is_netdevsim (const VaKernelPf *pf);
/* The vdpa device on @vf, or NULL: a child of the VF's PCI device; on a
 * netdevsim PF, the device va-SLOT on the vdpa bus. */
char *va_kernel_pf_vf_vdpa (const VaKernelPf *pf, const VaKernelVf *vf);

/* VF @vf of the PF netdev @pf, through the ops above. */
gboolean va_kernel_vf_get (const char *pf, guint32 vf, guint8 mac[6], guint16 *vlan, GError **error);
gboolean va_kernel_vf_set (const char *pf, guint32 vf, const guint8 mac[6], guint16 vlan, gboolean flags, GError **error);
gboolean va_kernel_vf_set_flags (const char *pf, guint32 vf, gboolean spoofchk, gboolean trust, GError **error);
/* Whether the PF's eswitch takes spoofchk, trust and a VF VLAN through
 * the PF: not in switchdev mode (mlx5: EOPNOTSUPP), nor on a host PF in
 * DPU mode (EPERM), esw/legacy.c; legacy, a PF without devlink (legacy
 * SR-IOV only) and a mode that cannot be read are tried. */
gboolean va_kernel_pf_takes_vf_settings (const VaKernelPf *pf);

/* Whether the running kernel's mlx5_core offloads TC flower rules (what
 * Open vSwitch's hw-offload asks of it): CONFIG_MLX5_CLS_ACT in
 * VA_PATH_BOOT/config-RELEASE. VA_KERNEL_TC_UNKNOWN where that file cannot be
 * read. */
typedef enum
{
  VA_KERNEL_TC_UNKNOWN,
  VA_KERNEL_TC_OFFLOAD,
  VA_KERNEL_TC_NONE,
} VaKernelTc;
VaKernelTc va_kernel_mlx5_tc_offload (void);

/* The PF's eswitch mode now, and setting it, on its devlink instance. */
gboolean va_kernel_eswitch_get (const VaKernelPf *pf, gboolean *switchdev, GError **error);
gboolean va_kernel_eswitch_set (const VaKernelPf *pf, gboolean switchdev, GError **error);

/* Sets the VF count: through 0 when changing a non-zero count, as the
 * kernel requires; refuses while a vdpa device sits on a VF that would go. */
gboolean va_kernel_set_numvfs (const VaKernelPf *pf, guint count, GError **error);
gboolean va_kernel_set_vf_autoprobe (const VaKernelPf *pf, gboolean on, GError **error);
/* The driver PCI device @pci (a VF) is bound to ("vfio-pci", "igbvf",
 * "mlx5_core"), or NULL when none is. */
char *va_kernel_pci_driver (const char *pci);
/* The ifindex of VF @vf's own netdev (one binding of mlx5_core: a new bind
 * makes a new netdev, with a new ifindex); 0 when it has none. */
int va_kernel_vf_ifindex (const VaKernelPf *pf, const VaKernelVf *vf);
/* Unbinds VF @vf from its host driver (with the PF's
 * sriov_drivers_autoprobe 0 it then stays on none). */
gboolean va_kernel_vf_unbind (const char *vf, GError **error);
/* The name of a vdpa device whose parent is the VF at @vf_syspath, or NULL. */
char *va_kernel_vf_vdpa_device (const char *vf_syspath);

/* The vdpa bus: autoprobe off so that a new device binds to nothing until
 * told; then driver_override=vhost_vdpa and drivers_probe, race-free.
 * Binding fails first when no vhost_vdpa driver is registered: the kernel
 * would take the probe and bind nothing. */
gboolean va_kernel_vdpa_autoprobe (gboolean on, GError **error);
gboolean va_kernel_bind_vhost_vdpa (const char *vdpa_name, GError **error);
/* /dev/vhost-vdpa-N of a bound device (under VA_PATH_DEV). */
char *va_kernel_vhost_node (const char *vdpa_name, GError **error);
/* The slot a vdpa device sits on: its VF's PCI address, or SLOT for a
 * VDUSE device va-SLOT. */
char *va_kernel_vdpa_slot (const char *vdpa_name, GError **error);
/* Names of the vdpa devices present, sorted. */
GPtrArray *va_kernel_vdpa_devices (GError **error);
gboolean va_kernel_set_node_access (const char *node, const char *group, guint mode, GError **error);

G_END_DECLS
