/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <gio/gio.h>
#include <json-glib/json-glib.h>

#include "va-ctl.h"

/* vdpactl's exit statuses, as vdpactl(8) EXIT STATUS lists them: 3 and 4
 * are LSB's "not running" and "insufficient privilege", which systemctl
 * uses too. */
enum
{
  VA_CTL_EXIT_OK = 0,
  VA_CTL_EXIT_FAILED = 1,
  VA_CTL_EXIT_USAGE = 2,
  VA_CTL_EXIT_UNREACHABLE = 3, /* the daemon, the bus or libvirt */
  VA_CTL_EXIT_DENIED = 4,      /* polkit, or the bus's policy */
  /* done in part: the report (stdout, or -j) says what became of each
   * part, one line on stderr what was not done */
  VA_CTL_EXIT_PARTIAL = 5,
};

/* The "version" of every -j document (docs/schemas/). */
#define VA_CTL_JSON_VERSION 1

/* One line on stderr, "vdpactl: ...", in our words; returns the exit
 * status @error's kind has. */
int va_ctl_fail (const GError *error);
/* The same for an operation that failed (1) or a usage error (2). */
int va_ctl_fail_msg (const char *msg);
int va_ctl_usage (const char *msg);

/* JSON: an object with "version", then members in lowercase snake_case,
 * "" as null, the VF as "pci/ADDR" under "mgmtdev". */
char *va_ctl_json_key (const char *key);
JsonBuilder *va_ctl_json_begin (void);
void va_ctl_json_add_members (JsonBuilder *b, GVariant *record);
void va_ctl_json_add_list (JsonBuilder *b, const char *member, GVariant *records);
/* Ends the object va_ctl_json_begin() began and prints it. */
void va_ctl_json_print (JsonBuilder *b);
/* { "version", the members of a{sv} @record } */
void va_ctl_print_json_record (GVariant *record);
/* { "version", @member: aa{sv} @records } */
void va_ctl_print_json_list (const char *member, GVariant *records);

typedef struct
{
  const char *key;
  const char *title;
  gboolean extra; /* shown with -o only */
  gboolean text;  /* words or a path: cut to fit a terminal, never a name */
} VaCtlColumn;

/* -o COLS (titles, comma-separated) and --no-headers of the next table;
 * va_ctl_table_check() says whether -o names columns of @cols (0, or the
 * exit status after its line on stderr). */
void va_ctl_table_options (const char *output, gboolean no_headers);
int va_ctl_table_check (const VaCtlColumn *cols);

/* @records: aa{sv}; aligned columns, or with @json_member the JSON
 * document that lists them under that member. */
void va_ctl_print_table (GVariant *records, const VaCtlColumn *cols, const char *json_member);
/* One record, a{sv}: a "key  value" line per member, or with @json its
 * JSON document. */
void va_ctl_print_record (GVariant *rec, gboolean json);
/* @rec with the members it lacks: each of @nulls as "" (null in JSON),
 * @falses as FALSE; one shape for a record whatever call gave it. */
GVariant *va_ctl_record_complete (GVariant *rec, const char *const *nulls, const char *const *falses);

/* Parses a command's options (plus -j when @json is given) and checks that
 * it has @min to @max arguments; returns 0, or the exit status. */
int va_ctl_parse (int *argc, char ***argv, const char *args, const char *summary, const GOptionEntry *extra, gboolean *json, int min,
                  int max);

/* The global options, given before the command or anywhere after it:
 * -j (every command that prints JSON), --connect URI (domain). */
gboolean va_ctl_global_json (void);
const char *va_ctl_global_connect (void);

int va_ctl_cmd_status (int argc, char **argv);
int va_ctl_cmd_pool (int argc, char **argv);
int va_ctl_cmd_lease (int argc, char **argv);
int va_ctl_cmd_dev (int argc, char **argv);
int va_ctl_cmd_network (int argc, char **argv);
int va_ctl_cmd_allocate (int argc, char **argv);
int va_ctl_cmd_release (int argc, char **argv);
int va_ctl_cmd_reconcile (int argc, char **argv);
int va_ctl_cmd_domain (int argc, char **argv);
int va_ctl_cmd_metrics (int argc, char **argv);
