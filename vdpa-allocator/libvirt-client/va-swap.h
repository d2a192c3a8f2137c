/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <glib.h>

#include "va-domain.h"
#include "va-libvirt.h"

G_BEGIN_DECLS

/* How a NIC went through an operation. */
typedef enum
{
  VA_SWAP_PATH_AS_IS,  /* portable or virtio already: moves as it is */
  VA_SWAP_PATH_NATIVE, /* QEMU reports no blocker: libvirt moves it accelerated */
  VA_SWAP_PATH_SWAP,   /* swapped to the other form by hot-plug */
} VaSwapPath;

const char *va_swap_path_name (VaSwapPath path);

/* One NIC of an operation, and what became of it. */
typedef struct
{
  char *mac;
  char *network;
  VaForm before;
  VaForm after;
  VaSwapPath path;
  char *note;
  double unplug_s; /* < 0: not measured */
  double plug_s;
  double offline_s; /* from the unplug request until the new form is plugged */
  gint64 unplug_at; /* monotonic µs of the unplug request; 0: none */
  /* va_swap_to_accelerated(): why it stays portable, as swap-back-outcome
   * spells it ("no-room", "refused"), or NULL */
  const char *outcome;
  /* the swap unplugged it and no plug followed (libvirt failed between):
   * the guest runs without it (outcome "lost") */
  gboolean lost;
  gboolean lost_marked; /* and swap-back-outcome="lost" is in the live metadata */
  /* vdpactl migrate: the NIC on the destination, as its live XML shows it
   * after the migration */
  gboolean dest_known;
  gboolean settled; /* accelerated there, or given up on (an outcome) */
  VaForm dest_form;
  double unaccelerated_s; /* < 0: never without acceleration */
  char *dest_note;
  /* a failover standby (its network asks for failover): @vf is the VF of
   * its transient member once the operation ends, NULL while the guest
   * runs on the standby alone */
  gboolean failover;
  char *vf;
} VaSwapNic;

/* Progress: one line per phase on stderr, "PREFIX[ELAPSED s] what", for
 * an operator at a terminal (vdpactl without -j); off (NULL) by default,
 * and in the daemon's helper. The elapsed time counts from this call. */
void va_swap_set_progress (const char *prefix);
void va_swap_progress (const char *fmt, ...) G_GNUC_PRINTF (1, 2);

void va_swap_nic_free (VaSwapNic *n);
/* The entry of @nic in @nics (VaSwapNic*), added when it has none. */
VaSwapNic *va_swap_nic (GPtrArray *nics, const VaNic *nic);
/* Adds "; text" to @n's note. */
void va_swap_note (VaSwapNic *n, const char *fmt, ...) G_GNUC_PRINTF (2, 3);

/* The swap-back marker of @mac in the live metadata set (@on, with
 * @outcome unless NULL) or dropped. */
gboolean va_swap_set_marker (VaLibvirt *lv, const char *mac, gboolean on, const char *outcome, GError **error);

/* The running domain's live XML, parsed. */
VaDomain *va_swap_live_domain (VaLibvirt *lv, GError **error);

/* Every accelerated NIC to the portable form, each lease released once its
 * NIC is off the device. @for_move: the NIC is marked swap-back="accelerated"
 * in the live metadata, for the host it lands on, and a failover standby
 * is left as it is (path native: QEMU unplugs its VF for the move by
 * itself and the guest goes on on the standby; the lease goes when the
 * domain stops here); else a standby's VF is unplugged (detached by its
 * alias) and its lease released before the standby is swapped. Fails,
 * leaving the NIC that failed in its old form, when a swap fails. */
gboolean va_swap_to_portable (VaLibvirt *lv, GPtrArray *nics, gboolean for_move, GError **error);

/* Every portable NIC (of @only: MACs, g_free'd keys, or NULL for all) whose pool here has
 * room to the accelerated form, a fresh lease each, its swap-back marker
 * dropped; where that fails the NIC stays portable in its slot on its VLAN,
 * and its note says why. A NIC of a failover network goes to its virtio
 * standby, and every standby without its VF (this one, or one the domain
 * started or moved here with) gets one: a VF of its pool leased by the
 * daemon (its pick) and plugged beside the standby as the transient member
 * (va_domain_failover_member_xml()); where there is no free VF or the plug
 * fails, the lease is released and the guest runs on the standby (outcome
 * "no-room" or "refused"). Fails only when the domain cannot be read. */
gboolean va_swap_to_accelerated (VaLibvirt *lv, GPtrArray *nics, GHashTable *only, GError **error);

/* The NICs an earlier swap lost (swap-back-outcome="lost" in the live
 * metadata), plugged back in the slot, with the MAC and on the VLAN of
 * their portable form, from the persistent definition, and marked
 * swap-back="accelerated" (their MACs added to @replugged). Fails when one
 * cannot be plugged back. va_swap_to_accelerated() runs it first. */
gboolean va_swap_replug_lost (VaLibvirt *lv, GHashTable *replugged, GError **error);

/* Promotion (issue 28): the running NIC @mac, on a software vDPA device,
 * moves onto a hardware one of its pool by the same-slot swap: unplug,
 * its software lease released, a hardware-only lease on the same port
 * path, the same <interface> plugged again (the guest sees the NIC
 * unplugged and plugged back, same MAC and PCI slot, for the swap's
 * seconds). Without a free hardware slot it gets a software device again
 * and is plugged back as it was (outcome "no-room"); where no plug
 * follows the unplug it is marked lost as a swap's NIC is. A NIC on
 * hardware, or not accelerated, is left alone (outcome "refused", a
 * note). Fails only when the domain or the leases cannot be read. */
gboolean va_swap_promote (VaLibvirt *lv, GPtrArray *report, const char *mac, GError **error);

/* After a failure: accelerated again each NIC of @nics swapped to portable. */
void va_swap_roll_back (VaLibvirt *lv, GPtrArray *nics);

G_END_DECLS
