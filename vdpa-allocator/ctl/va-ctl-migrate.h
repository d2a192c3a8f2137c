/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include "va-domain.h"
#include "va-libvirt.h"

G_BEGIN_DECLS

/* vdpactl domain migrate|save|managedsave|restore (@argv[0] names it);
 * -1 for another word. */
int va_ctl_domain_move (int argc, char **argv, const char *uri);

/* vdpactl domain accelerate|portable --live: the running domain's NICs
 * swapped to @form through hot-plug, the leases of this host's daemon
 * made or released; the report as JSON with @json. */
int va_ctl_domain_swap_live (VaLibvirt *lv, VaForm form, gboolean json);

G_END_DECLS
