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

/* Rewrites every marked interface to @form (accelerated: each NIC whose mode
 * and pool capacity allow it, portable: all). Capacity is consumed in the
 * order of the vdpa:nic elements. All NICs are resolved before anything is changed: on error
 * the document is untouched. A form with an accelerated NIC whose pool may
 * make software devices (VaNicPlan.software) gains shared, file-backed
 * memory (va_domain_memory_is_shared()), merged into the domain's
 * <memoryBacking>; what it changed is recorded in vdpa:nics shared-memory,
 * and a form without such a NIC takes back just that. */
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

/* Whether the domain's guest memory is shared and file-backed, which a
 * software vDPA device's relay needs to reach it: <memoryBacking> with
 * hugepages or a memfd or file <source>, and shared <access> (or every
 * NUMA cell memAccess='shared'), no cell memAccess='private'. The
 * accelerated form of a domain with a NIC that may get a software device
 * has it (va_domain_rewrite()). */
gboolean va_domain_memory_is_shared (const VaDomain *self);

/* Serializes the document as libxml2 does, in UTF-8, keeping the XML
 * declaration only when the input had one. */
char *va_domain_to_string (const VaDomain *self, gsize *len);

/* Parse, rewrite and serialize in one step. */
char *va_domain_rewrite_xml (const char *xml, gssize len, const VaHostView *view, VaForm form, GError **error);

/* The transient member of the failover pair of the NIC @mac (in the
 * failover form: its <interface> is the virtio standby), on the VF @vf
 * (a PCI address, "0000:3c:00.1"), as libvirt's attach takes it: type
 * 'hostdev' (managed), the NIC's MAC, the VLAN of its plan unless the
 * pool tags the VF's representor, <teaming type='transient'
 * persistent='STANDBY ALIAS'/> and an alias of its own
 * (va_member_alias()), by which it can be detached. */
char *va_domain_failover_member_xml (const VaDomain *self, const VaHostView *view, const char *mac, const char *vf, GError **error);

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

/* The MACs (normalized) of @current's NICs marked swap-back-outcome="lost",
 * at most VA_XML_MAX_NICS; NULL with @error when the metadata does not
 * parse. Read from the metadata alone: the live domain has no <interface>
 * for them, so va_domain_parse() refuses it. */
GStrv va_metadata_lost_macs (const char *current, GError **error);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (VaDomain, va_domain_free)

G_END_DECLS
