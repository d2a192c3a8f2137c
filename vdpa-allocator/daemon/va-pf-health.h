/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <glib.h>

#include "va-enum.h"

G_BEGIN_DECLS

/* Why a PF takes no lease, as one of a fixed set of words: the metrics'
 * reason label, whose values must not change with the wording or the
 * numbers of the text that says it to people (the health reason). */
typedef enum
{
  VA_PF_HEALTH_OK,             /* healthy */
  VA_PF_HEALTH_GONE,           /* left the host (hot-unplug, driver unbound) */
  VA_PF_HEALTH_UNSUPPORTED,    /* a model that cannot serve the pool's kind */
  VA_PF_HEALTH_NO_SRIOV,       /* sriov_totalvfs is 0 */
  VA_PF_HEALTH_NO_NETDEV,      /* no driver bound, so no uplink */
  VA_PF_HEALTH_LINK_DOWN,      /* its link is down */
  VA_PF_HEALTH_NO_VDPA_VF,     /* none of its VFs has a vdpa management device */
  VA_PF_HEALTH_PREPARE_FAILED, /* setting it up for its pool failed (VFs, eswitch mode, the VLAN's place) */
  VA_PF_HEALTH_OTHER,
} VaPfHealth;
#define VA_PF_HEALTH_LAST (VA_PF_HEALTH_OTHER + 1)

VA_ENUM_DECL (va_pf_health, VaPfHealth)

G_END_DECLS
