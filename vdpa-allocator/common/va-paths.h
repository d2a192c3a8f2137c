/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/* Every root path of the suite, so that tests can run the real binaries
 * against testbeds. Each honours an environment override. */
typedef enum
{
  VA_PATH_CONFIG,  /* VDPA_ALLOCATOR_CONFIG_DIR, else $sysconfdir/vdpa-allocator */
  VA_PATH_STATE,   /* VDPA_ALLOCATOR_STATE_DIR, else $localstatedir/lib/vdpa-allocator */
  VA_PATH_RUN,     /* VDPA_ALLOCATOR_RUN_DIR, else /run/vdpa-allocator */
  VA_PATH_SYSFS,   /* $UMOCKDEV_DIR/sys when a umockdev testbed is active, else /sys */
  VA_PATH_DEV,     /* $UMOCKDEV_DIR/dev likewise, else /dev */
  VA_PATH_HOOKS,   /* VDPA_ALLOCATOR_HOOKS_DIR, else $sysconfdir/libvirt/hooks */
  VA_PATH_MODULES, /* $UMOCKDEV_DIR/lib/modules in a testbed, else /lib/modules */
  VA_PATH_BOOT,    /* $UMOCKDEV_DIR/boot likewise, else /boot: the kernel's config-RELEASE */
} VaPath;

/* The root for @which; the string lives as long as the process. */
const char *va_path_get (VaPath which);

/* The same, for the daemon under its unit: systemd's StateDirectory= and
 * RuntimeDirectory= ($STATE_DIRECTORY, $RUNTIME_DIRECTORY) come before
 * the compiled-in defaults, after the VDPA_ALLOCATOR_* overrides. Only the
 * daemon reads them: the hook and vdpactl may run under other units. */
const char *va_path_get_for_unit (VaPath which);

/* A helper program: beside the running binary if there, else in
 * $libexecdir. */
char *va_path_libexec (const char *name);

/* The directory holding port symlinks: <run dir>/ports. */
char *va_path_ports (const char *run_dir);

G_END_DECLS
