/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <gio/gio.h>

#include "va-config.h"
#include "va-pf-health.h"

G_BEGIN_DECLS

/* The one provisioning seam: everything that touches the NIC goes through
 * a backend. "kernel" drives real hardware (sysfs, netlink, libudev);
 * "sim" is an in-process simulated ConnectX for machines without one. */

typedef struct
{
  char *name; /* PF netdev name */
  char *pci;  /* PF PCI address */
  guint16 vendor;
  guint16 device;
  int numa_node; /* -1: unknown */
  gboolean healthy;
  char *health_reason;     /* NULL when healthy */
  VaPfHealth health_code;  /* health_reason as a fixed word; OK when healthy */
  GPtrArray *vfs;          /* char*, the slots: VF PCI addresses (VDUSE: SLOT of va-SLOT) */
  GPtrArray *vf_reasons;   /* char* or NULL, by slot: why that VF cannot carry vDPA; NULL: all can, or unknown */
  gboolean vduse_test;     /* the VDUSE test PF: only vduse-test pools take it */
  gboolean netdevsim_test; /* a netdevsim PF: only netdevsim-test pools take it */
  guint leases;            /* set by the allocator before prepare_pf: leases it holds on the PF's VFs */
  gboolean sriov_only;     /* no ConnectX (another vendor's SR-IOV PF): only kind=sriov pools take it */
  char *sriov_reason;      /* why it cannot serve a kind=sriov pool, or NULL; healthy and health_reason are kind=vdpa's */
  VaPfHealth sriov_code;   /* sriov_reason as a fixed word; OK when NULL */
  /* the PF's eswitch as discovery read it, opaque to the allocator: a
   * change (an operator's devlink) prepares the PF again, where the VLAN's
   * place is checked; 0 for a backend that does not say */
  int eswitch_seen;
  /* for people (vdpactl dev list), never for a decision: the model's
   * name and the eswitch mode ("legacy", "switchdev"), NULL when not known */
  char *model;
  char *eswitch;
} VaPfInfo;

void va_pf_info_free (VaPfInfo *pf);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (VaPfInfo, va_pf_info_free)

/* What a lease needs made on a slot. */
typedef struct
{
  const char *slot; /* a VF PCI address, or a VDUSE slot */
  const char *pf;   /* its PF's name */
  const char *mac;
  guint16 queues;
  guint16 mtu;  /* 0: default */
  guint16 vlan; /* 0: none */
  const VaPoolConfig *pool;
} VaDeviceRequest;

/* What a software vDPA device needs (issue 28): a VDUSE virtio-net device
 * with the NIC's MAC and MTU and one queue pair, its tap on the network's
 * fallback bridge in the NIC's VLAN, and the relay between them. */
typedef struct
{
  const char *mac;
  guint16 mtu;  /* 0: 1500 */
  guint16 vlan; /* 0: untagged */
  const char *bridge;
  VaBridgeKind bridge_kind;
  const char *relay_user;
  guint relay_memory_mib;
  const VaPoolConfig *pool; /* its node's group and mode */
} VaSoftwareRequest;

/* The steps of making a device, each timed: the hook's budget is set from
 * them (tests/bench/bench_lab_steps.py), and the metrics show them. */
typedef enum
{
  VA_DEVICE_STEP_CREATE, /* vdpa DEV_NEW */
  VA_DEVICE_STEP_BIND,   /* its access file written, bound to vhost_vdpa */
  VA_DEVICE_STEP_NODE,   /* /dev/vhost-vdpa-N there with its group and mode */
  VA_DEVICE_STEP_VLAN,   /* the pool's VLAN method applied */
} VaDeviceStep;
#define VA_DEVICE_STEP_LAST (VA_DEVICE_STEP_VLAN + 1)

VA_ENUM_DECL (va_device_step, VaDeviceStep)

/* Who holds a kind=sriov pool's VF. */
typedef enum
{
  VA_VF_NOBODY,  /* on no driver, and libvirt keeps no state of it */
  VA_VF_LIBVIRT, /* libvirt passes it through: its hostdevmgr state is there, or the VF is on vfio-pci */
  VA_VF_HOST,    /* a host driver is bound (igbvf, mlx5_core, ...): a container's or the host's own VF */
} VaVfHolder;

/* A vDPA device that exists. */
typedef struct
{
  char *name;                          /* vdpa device name */
  char *slot;                          /* the slot it sits on */
  char *chardev;                       /* /dev/vhost-vdpa-N */
  gint64 step_us[VA_DEVICE_STEP_LAST]; /* how long each step of making it took; 0: not run */
} VaDeviceInfo;

void va_device_info_free (VaDeviceInfo *dev);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (VaDeviceInfo, va_device_info_free)

#define VA_TYPE_BACKEND (va_backend_get_type ())
G_DECLARE_DERIVABLE_TYPE (VaBackend, va_backend, VA, BACKEND, GObject)

struct _VaBackendClass
{
  GObjectClass parent_class;

  const char *name;
  /* The PFs present now, with their VFs. */
  GPtrArray *(*discover) (VaBackend *self, GError **error);
  /* Brings a PF to what its pool asks (VF count, eswitch mode). The VFs it
   * makes or remakes replace pf->vfs, so that they become the pool's slots. */
  gboolean (*prepare_pf) (VaBackend *self, VaPfInfo *pf, const VaPoolConfig *pool, GError **error);
  /* Makes a vDPA device on a slot, with MAC, queues, MTU and VLAN applied. */
  VaDeviceInfo *(*create_device) (VaBackend *self, const VaDeviceRequest *req, GError **error);
  /* Deletes it and resets the VF; a device already gone is no error. */
  gboolean (*destroy_device) (VaBackend *self, const char *slot, const char *name, const VaPoolConfig *pool, GError **error);
  /* Every vDPA device on the host that a backend could have made. */
  GPtrArray *(*list_devices) (VaBackend *self, GError **error);
  /* Whether a process holds the char device open. */
  gboolean (*device_busy) (VaBackend *self, const char *chardev);
  /* Why @pool, on its PFs of PCI addresses @pcis, works but without the
   * NIC carrying its traffic (OVS hw-offload off), or NULL. May run a
   * program: called at start, reload and device changes, never per call. */
  char *(*pool_warning) (VaBackend *self, const VaPoolConfig *pool, const char *const *pcis);
  /* A VF @slot of PF @pf in a kind=sriov pool that no lease holds. Left
   * with a VLAN or an administrative MAC (a passthrough whose restore
   * never ran: a crash), and held by no one, it gets both reset, and
   * *@repaired says what it had; a VF that is right, or held (by libvirt,
   * or bound to vfio-pci), is left alone and *@repaired stays NULL. */
  gboolean (*repair_vf) (VaBackend *self, const char *slot, const char *pf, char **repaired, GError **error);
  /* Who holds VF @slot of a kind=sriov pool; for VA_VF_HOST, *@driver
   * (when not NULL) names the driver. */
  VaVfHolder (*vf_holder) (VaBackend *self, const char *slot, char **driver);
  /* A kind=sriov pool on a switchdev eswitch (vlan-method bridge or ovs):
   * VF @slot, which libvirt passes through, gets the NIC's VLAN (0:
   * untagged) on its representor with the pool's method, as a vDPA
   * device's VF does; detach_vf takes the representor out again. */
  gboolean (*attach_vf) (VaBackend *self, const char *slot, const VaPoolConfig *pool, const char *mac, guint16 vlan, GError **error);
  gboolean (*detach_vf) (VaBackend *self, const char *slot, const VaPoolConfig *pool, GError **error);
  /* A software vDPA device (issue 28), made and bound to vhost_vdpa with
   * its relay running; its slot is its name. Backends without one leave
   * these NULL: a software request is then an error. */
  VaDeviceInfo *(*create_software) (VaBackend *self, const VaSoftwareRequest *req, GError **error);
  /* Deletes the vdpa device, stops the relay, destroys the VDUSE device
   * (the tap goes with the relay); one already gone is no error. */
  gboolean (*destroy_software) (VaBackend *self, const char *name, GError **error);
  /* The software device of @req, made before (the daemon restarted, its
   * relay died): served again by a relay of this daemon, or made anew
   * (*@made) where it is gone. */
  VaDeviceInfo *(*resume_software) (VaBackend *self, const VaSoftwareRequest *req, gboolean *made, GError **error);
  /* The names of the software devices there are (char*), leased or not:
   * reconciliation destroys those no lease holds. */
  GPtrArray *(*list_software) (VaBackend *self, GError **error);
  /* Why software device @name carries nothing and will not again by
   * itself (its relay died too often and was given up on), or NULL while
   * it is served or being restarted. resume_software ends that. */
  char *(*software_stalled) (VaBackend *self, const char *name);
  /* A kind=sriov pool's VF @slot that libvirt passes through: spoofchk and
   * trust through the PF where its eswitch takes them (legacy), read back;
   * nothing where it does not (switchdev: the representor's port filters).
   * A backend without it sets nothing. */
  gboolean (*secure_vf) (VaBackend *self, const char *slot, const VaPoolConfig *pool, gboolean spoofchk, gboolean trust, GError **error);

  /* Signal "pfs-changed": PFs appeared, disappeared or changed (VFs, link,
   * driver) since discover; the allocator discovers again. Emitted from the
   * thread-default main context of the backend's creation, once a burst of
   * device events has settled. Backends without a device monitor (sim)
   * never emit it.
   *
   * Signal "software-stalled" (const char *name, const char *reason):
   * software device @name was given up on, as software_stalled then says
   * with @reason; emitted where its relay's restarts run (the main
   * context). The sim backend's stand-in: a RUN/sim/relay/NAME.stalled
   * file written. */
};

const char *va_backend_get_name (VaBackend *self);
GPtrArray *va_backend_discover (VaBackend *self, GError **error);
gboolean va_backend_prepare_pf (VaBackend *self, VaPfInfo *pf, const VaPoolConfig *pool, GError **error);
VaDeviceInfo *va_backend_create_device (VaBackend *self, const VaDeviceRequest *req, GError **error);
gboolean va_backend_destroy_device (VaBackend *self, const char *slot, const char *name, const VaPoolConfig *pool, GError **error);
GPtrArray *va_backend_list_devices (VaBackend *self, GError **error);
gboolean va_backend_device_busy (VaBackend *self, const char *chardev);
char *va_backend_pool_warning (VaBackend *self, const VaPoolConfig *pool, const char *const *pcis);
gboolean va_backend_repair_vf (VaBackend *self, const char *slot, const char *pf, char **repaired, GError **error);
VaVfHolder va_backend_vf_holder (VaBackend *self, const char *slot, char **driver);
gboolean va_backend_attach_vf (VaBackend *self, const char *slot, const VaPoolConfig *pool, const char *mac, guint16 vlan, GError **error);
gboolean va_backend_detach_vf (VaBackend *self, const char *slot, const VaPoolConfig *pool, GError **error);
VaDeviceInfo *va_backend_create_software (VaBackend *self, const VaSoftwareRequest *req, GError **error);
gboolean va_backend_destroy_software (VaBackend *self, const char *name, GError **error);
VaDeviceInfo *va_backend_resume_software (VaBackend *self, const VaSoftwareRequest *req, gboolean *made, GError **error);
GPtrArray *va_backend_list_software (VaBackend *self, GError **error);
char *va_backend_software_stalled (VaBackend *self, const char *name);
gboolean va_backend_secure_vf (VaBackend *self, const char *slot, const VaPoolConfig *pool, gboolean spoofchk, gboolean trust,
                               GError **error);
/* Whether @pool is kind=sriov with its VLAN on the representors. */
gboolean va_pool_config_representor_vlan (const VaPoolConfig *pool);

/* The kernel backend: ConnectX PFs, VFs and vDPA devices through libudev,
 * sysfs and netlink, following the udev monitor. */
VaBackend *va_backend_kernel_new (const VaConfig *config, const char *run_dir, GError **error);

/* Whether any process on the host holds @path open (a scan of /proc). */
gboolean va_chardev_held_open (const char *path);

/* Whether @pf is one that @pool selects. */
gboolean va_pool_config_matches (const VaPoolConfig *pool, const VaPfInfo *pf);
/* Why @pool does not select @pf, naming the key ("match-pf=enp179s0f1",
 * "type=vduse-test"), or NULL when it does. */
char *va_pool_config_mismatch (const VaPoolConfig *pool, const VaPfInfo *pf);
/* The vdpa management device of @pf's VF @i as `vdpa mgmtdev show` names
 * it ("pci/0000:3b:00.2", "vdpasim_net", "vduse"), or NULL when it has
 * none (the VF's reason says why, or the PF carries no vDPA). */
char *va_pf_info_vf_mgmtdev (const VaPfInfo *pf, guint i);

/* The simulated ConnectX-6 Dx: config->sim_pfs PFs × config->sim_vfs VFs,
 * its vDPA devices plain files under @run_dir/sim so that port symlinks
 * resolve. */
VaBackend *va_backend_sim_new (const VaConfig *config, const char *run_dir, GError **error);

G_END_DECLS
