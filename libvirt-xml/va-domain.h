/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <glib.h>

#include "va-host-view.h"
#include "va-ids.h"
#include "va-precheck.h"

G_BEGIN_DECLS

#define VA_XML_MAX_DEPTH 256
/* libxml2 checks an element's attributes for duplicates in quadratic time,
 * and keeps about a hundred bytes per node: both bounded before it parses */
#define VA_XML_MAX_ATTRS 256
#define VA_XML_MAX_NODES 200000
#define VA_XML_MAX_NICS 1024

typedef enum
{
  /* type='vdpa' on the NIC's port path; on a pool of kind sriov, a VF of
   * the pool's hostdev network (type='network', or type='hostdev' as
   * libvirt shows a started domain) */
  VA_FORM_ACCELERATED,
  VA_FORM_PORTABLE, /* virtio on the network's bridge and VLAN */
} VaForm;

#define VA_FORM_LAST (VA_FORM_PORTABLE + 1)

/* One vdpa:nic of the metadata, and what the document makes of it. */
typedef struct
{
  char *mac;     /* lower case */
  char *network; /* NULL: the intent is inline */
  gboolean mode_set;
  VaMode mode;
  char *pool;
  guint16 vlan; /* 0: none */
  char *bridge;
  gboolean bridge_kind_set;
  VaBridgeKind bridge_kind;
  guint16 queues; /* 0: the pool's max-vqp */

  char *target_dev;      /* the tap libvirt named in <target dev>, or NULL */
  char *source_dev;      /* an accelerated interface's <source dev>, or NULL */
  VaForm form;           /* the form of its <interface> in the document now */
  VaPoolKind accel_kind; /* of an accelerated form: a vdpa device or an sriov VF */
  gboolean fallback;     /* portable because the pool had no room */
  /* <interface type='hostdev'>, as libvirt shows a started domain's NIC of
   * a hostdev network: the VF it chose ("0000:01:10.0", from <source>'s
   * PCI <address>), or NULL; and the VLAN it applied (<vlan><tag>, 0:
   * none; G_MAXUINT16 for more than one tag, which no VF carries). */
  char *vf;
  guint16 vf_vlan;
  /* swap-back="accelerated": made portable for a move (migrate, save) and
   * wants its accelerated form back on the host it lands on. Kept by every
   * rewrite that leaves it portable, dropped by one that accelerates it. */
  gboolean swap_back;
  /* swap-back-outcome: why the host it landed on left it portable
   * ("no-room", "refused"), written there by vdpa-allocator-libvirt-swap;
   * NULL while it has not tried. Dropped with swap-back, and by the
   * rewrite for a restore or an incoming migration (a new try). */
  char *swap_back_outcome;
} VaNic;

/* The resolved intent of one NIC against a host view. */
typedef struct
{
  VaMode mode;
  const char *pool; /* NULL for virtio-only */
  guint16 vlan;
  const char *bridge; /* NULL: no portable form */
  VaBridgeKind bridge_kind;
  guint16 queues;  /* 0 on an sriov pool: the VF's driver has its own */
  VaPoolKind kind; /* the pool's; vdpa when there is none */
  /* sriov on a switchdev eswitch: the daemon sets the VLAN on the VF's
   * representor, and the form carries no <vlan> for libvirt */
  gboolean representor_vlan;
} VaNicPlan;

typedef struct _VaDomain VaDomain;

/* Parses a domain XML document and its vdpa:nics metadata. Refuses DTDs,
 * entities, documents over VA_XML_MAX_SIZE or deeper than VA_XML_MAX_DEPTH,
 * and every malformed piece of metadata. Never touches the network. */
VaDomain *va_domain_parse (const char *xml, gssize len, GError **error);
void va_domain_free (VaDomain *self);

/* A cheap pre-check: FALSE means the document names no vdpa metadata at all,
 * so a caller may skip parsing (the hook runs at every VM start). */
gboolean va_domain_text_may_have_intent (const char *xml, gsize len);

/* The document's <name> and <uuid> alone, with the limits of
 * va_domain_parse() but none of its metadata (no NICs): what a caller
 * that must not fail needs from a domain whose metadata does not parse. */
VaDomain *va_domain_parse_identity (const char *xml, gssize len, GError **error);

const char *va_domain_get_name (const VaDomain *self);
/* The canonical (lower case, dashed) UUID, or NULL when the domain has none. */
const char *va_domain_get_uuid (const VaDomain *self);
/* VaNic*, in metadata order. */
GPtrArray *va_domain_get_nics (const VaDomain *self);

gboolean va_nic_resolve (const VaNic *nic, const VaHostView *view, VaNicPlan *plan, GError **error);

/* The layout of port paths, PORT_ROOT/UUID/MAC (the daemon makes them,
 * the engine writes them into <source dev>): a domain's directory, and
 * the port path of one of its accelerated NICs. */
char *va_port_dir (const char *port_root, const char *uuid);
char *va_port_path (const char *port_root, const char *uuid, const char *mac);

/* Rewrites every marked interface to @form (accelerated: each NIC whose mode
 * and pool capacity allow it, portable: all). Capacity is consumed in the
 * order of the vdpa:nic elements. All NICs are resolved before anything is changed: on error
 * the document is untouched. */
gboolean va_domain_rewrite (VaDomain *self, const VaHostView *view, VaForm form, GError **error);

/* For a restore or an incoming migration: QEMU loads a saved virtio-net
 * only into a backend that offers what the saved one did, and vhost-vdpa
 * offers less than a tap ("saved image requires TUN_F_UFO support"). So a
 * portable NIC stays portable; an accelerated one stays accelerated where
 * its pool has room, else goes portable where it may. A swap-back-outcome
 * goes: the host it lands on tries again. */
gboolean va_domain_rewrite_saved (VaDomain *self, const VaHostView *view, GError **error);

/* The text of @xml rewritten for @view @to "accelerated", "portable",
 * "auto" (accelerated where there is room) or "saved" (as
 * va_domain_rewrite_saved()). Pure: safe from any thread for a view that
 * no thread changes meanwhile. */
char *va_domain_rewrite_text (const char *xml, gssize len, const VaHostView *view, const char *to, GError **error);

/* Serializes the document as libxml2 does, in UTF-8, keeping the XML
 * declaration only when the input had one. */
char *va_domain_to_string (const VaDomain *self, gsize *len);

/* Parse, rewrite and serialize in one step. */
char *va_domain_rewrite_xml (const char *xml, gssize len, const VaHostView *view, VaForm form, GError **error);

VA_ENUM_DECL (va_form, VaForm)

/* The <interface> element whose MAC is @mac, serialized (what libvirt's
 * detach wants), or NULL with VA_ERROR_NOT_FOUND. */
char *va_domain_interface_xml (const VaDomain *self, const char *mac, GError **error);

/* The vdpa:nics metadata @current (as libvirt's virDomainGetMetadata
 * returns it: without its namespace; or NULL for none) with a NIC added
 * (@network non-NULL) or removed (@network NULL), every other NIC kept, in
 * the form virDomainSetMetadata takes (libvirt adds the namespace). */
char *va_metadata_update (const char *current, const char *mac, const char *network, GError **error);

/* The same metadata with the swap-back="accelerated" marker of the NIC
 * @mac set (@on, with swap-back-outcome=@outcome unless NULL) or dropped
 * with its outcome, everything else kept; VA_ERROR_NOT_FOUND when no NIC
 * has @mac. */
char *va_metadata_set_swap_back (const char *current, const char *mac, gboolean on, const char *outcome, GError **error);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (VaDomain, va_domain_free)

G_END_DECLS
