/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <gio/gio.h>

#include "va-alloc-request.h"
#include "va-config.h"
#include "va-host-view.h"
#include "va-lease.h"

G_BEGIN_DECLS

/* The one client of vdpa-allocatord, for the hook helper, vdpactl and the
 * swap helper: one connection per process, a typed call per method, and
 * the one offline policy of the rewrite (va_client_rewrite_domain()).
 * The daemon's interface is spelled here and in its adapter only.
 *
 * Every failure is the daemon's refusal (VA_ERROR, its own message) or
 * VA_ERROR_UNREACHABLE with va_bus_call()'s words for "not running" and
 * "did not answer"; GDBus's own errors (the bus's policy, a daemon of
 * another version) are left as they are, for vdpactl's exit statuses. */

/* vdpactl's and the swap helper's bound on one call: a reconcile may wait
 * for libvirt, a lease for the disk. */
#define VA_CLIENT_TIMEOUT_MS 30000

typedef struct _VaClient VaClient;

/* A client whose calls wait at most @timeout_ms each; with @one_budget,
 * every call from now on shares those @timeout_ms, connecting included
 * (the hook: libvirtd waits for all of its talk with the daemon). The bus
 * is connected at the first call, within the time left. */
VaClient *va_client_new (int timeout_ms, gboolean one_budget);
void va_client_free (VaClient *self);

/* The process's client, VA_CLIENT_TIMEOUT_MS a call: vdpactl's and the
 * swap helper's, shared by both when vdpactl runs the swap. */
VaClient *va_client_get_default (void);

/* Allocate: the lease, decoded. */
VaLease *va_client_allocate (VaClient *self, const VaAllocRequest *req, GError **error);

/* Allocate for @n requests at once, answered together, so that the daemon
 * commits them in one transaction. FALSE with @error when none could be
 * sent (no bus); else TRUE, and for each i either @leases[i] or
 * @errors[i] is set (both arrays of @n, owned by the caller). */
gboolean va_client_allocate_batch (VaClient *self, const VaAllocRequest *reqs, guint n, VaLease **leases, GError **errors, GError **error);

gboolean va_client_release (VaClient *self, const char *uuid, const char *mac, GError **error);
/* ReleaseDomain and Claim: how many leases; -1 with @error. */
gint va_client_release_domain (VaClient *self, const char *uuid, GError **error);
gint va_client_claim (VaClient *self, const char *uuid, GError **error);
gboolean va_client_swap_back (VaClient *self, const char *uuid, const char *name, GError **error);
gboolean va_client_drain (VaClient *self, const char *pool, gboolean draining, GError **error);

/* ListLeases: the records as the daemon sent them, aa{sv} (a lease's keys
 * and broken, broken_reason). */
GVariant *va_client_list_leases (VaClient *self, GError **error);
/* ListDevices: the PFs as the daemon sent them, aa{sv} (each with its
 * "vfs" aa{sv}); *@left_out, how many VFs the reply left out. */
GVariant *va_client_list_devices (VaClient *self, guint *left_out, GError **error);
/* Reconcile: its report, a{sv}. */
GVariant *va_client_reconcile (VaClient *self, GError **error);

/* Every property of the manager (@path NULL) or of the pool at @path,
 * a{sv}. A pool that is not there is GDBus's UNKNOWN_OBJECT (or
 * UNKNOWN_METHOD, UNKNOWN_INTERFACE), as the bus said it. */
GVariant *va_client_get_properties (VaClient *self, const char *path, GError **error);
/* The manager's LeaseCount in @props (its GetAll), which a daemon older
 * than it does not have: FALSE then. */
gboolean va_client_lookup_lease_count (GVariant *props, guint32 *count);

/* RewriteDomain: @xml rewritten by the daemon to @to ("accelerated",
 * "portable", "auto" or "saved"), with its pools' live room. */
char *va_client_rewrite (VaClient *self, const char *xml, const char *to, GError **error);

/* The rewrite, and the one offline policy (docs/hook-contract.md): the
 * daemon's answer or refusal when it answers; when it is unreachable (not
 * on the bus, or no answer in time), an offline rewrite from the
 * configuration in @config_dir (NULL: the default directory, an empty
 * configuration when that does not exist) with no limit on room, where
 * "saved" is the portable form (nothing can be leased); a configuration
 * that cannot be read or parsed fails with the loader's error, which names
 * the file and the line. */
char *va_client_rewrite_domain (VaClient *self, const char *xml, const char *to, const char *config_dir, GError **error);

/* The configuration under that policy: the one in @config_dir (NULL: the
 * default directory, an empty configuration when that does not exist);
 * the loader's error, which names the file and the line, when it cannot
 * be read or parsed. The hook's budget comes from it too. */
VaConfig *va_client_load_config (const char *config_dir, GError **error);

/* The offline half of that policy: this host from the configuration in
 * @config_dir (NULL: the default directory, an empty configuration when
 * that does not exist), its pools with no limit on room; the loader's
 * error when the configuration cannot be read or parsed. For vdpactl
 * rewrite, which never asks the daemon. */
VaHostView *va_client_offline_view (const char *config_dir, GError **error);

/* Allocate's "form" for the NIC @nic (its intent) of a domain whose
 * memory is @shared (va_domain_memory_is_shared()): "hardware" when it is
 * not and this host's configuration (@view; NULL: the default one,
 * offline; unknown counts as yes) may give the NIC a software device,
 * whose relay reaches only shared, file-backed memory; else NULL. Sent
 * only then, so that a daemon from before the option is asked nothing
 * new where there are no software slots. */
const char *va_client_alloc_form (const VaHostView *view, const VaNic *nic, gboolean shared);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (VaClient, va_client_free)

G_END_DECLS
