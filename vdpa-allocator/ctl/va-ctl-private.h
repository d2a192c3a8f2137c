/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <gio/gio.h>

#include "va-ctl.h"

/* One line on stderr, "vdpactl: ...", and exit status 1. */
int va_ctl_fail (const GError *error);
int va_ctl_fail_msg (const char *msg);
void va_ctl_print_json (GVariant *value);

/* @method of the daemon's manager interface, with vdpactl's budget;
 * errors as va_bus_call() gives them. Consumes a floating @params. */
GVariant *va_ctl_call (const char *method, GVariant *params, const char *reply_type, GError **error);

typedef struct
{
  const char *key;
  const char *title;
} VaCtlColumn;

/* @records: aa{sv}; aligned columns, or JSON with @json. */
void va_ctl_print_table (GVariant *records, const VaCtlColumn *cols, gboolean json);

/* Parses a command's options (plus -j when @json is given) and checks that
 * it has @min to @max arguments; returns 0, or the exit status. */
int va_ctl_parse (int *argc, char ***argv, const char *args, const char *summary, const GOptionEntry *extra, gboolean *json, int min,
                  int max);

int va_ctl_cmd_status (int argc, char **argv);
int va_ctl_cmd_pool (int argc, char **argv);
int va_ctl_cmd_lease (int argc, char **argv);
int va_ctl_cmd_network (int argc, char **argv);
int va_ctl_cmd_allocate (int argc, char **argv);
int va_ctl_cmd_release (int argc, char **argv);
int va_ctl_cmd_reconcile (int argc, char **argv);
int va_ctl_cmd_domain (int argc, char **argv);
