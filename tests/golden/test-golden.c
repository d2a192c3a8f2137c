/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The golden-file tier of the domain-XML rewrite engine.
 *
 * Each folder under cases/ holds input.xml, an args key file and the
 * expectation: output.xml (the rewritten document, byte for byte) or
 * error.txt (the one-line error message). With VA_REGENERATE=1 the
 * expectations are written instead of compared, to be reviewed as diffs.
 *
 * Besides the expectations this proves, for every case that has an output:
 * the rewrite is idempotent and reversible, the vdpa:nics metadata of input
 * and output is valid against vdpa-metadata.rng, and `vdpactl rewrite` gives
 * the same bytes (or the same error) as the engine. */
#include "config.h"

#include <gio/gio.h>
#include <glib/gstdio.h>
#include <libxml/parser.h>
#include <libxml/relaxng.h>
#include <libxml/tree.h>
#include <string.h>
#include <unistd.h>

#include "va-config.h"
#include "va-domain.h"
#include "va-error.h"

#define PORT_ROOT "/run/vdpa-allocator/ports"

typedef struct
{
  char *name;
  char *dir;
  char *config_dir;
  char **capacity; /* POOL=N, NULL-terminated; may be NULL */
  VaForm form;
  gboolean saved; /* to=saved: as the hook's migrate/restore begin rewrite */
  gsize pad_to;   /* 0: the input as it is */
  gboolean schema_invalid;
  gboolean no_portable_form; /* a NIC has no bridge */
  gboolean has_output;       /* output.xml, else error.txt */
  char *member;              /* member=VF: the failover members on that VF added, as the daemon plugs them */
} Case;

static char *cases_dir;
static char *config_root;
static char *rng_path;
static gboolean regenerate;
static xmlRelaxNG *rng_schema;

static void
case_free (Case *c)
{
  g_free (c->name);
  g_free (c->dir);
  g_free (c->config_dir);
  g_free (c->member);
  g_strfreev (c->capacity);
  g_free (c);
}

static Case *
case_load (const char *name, GError **error)
{
  g_autoptr (GKeyFile) kf = g_key_file_new ();
  g_autofree char *args = NULL;
  g_autofree char *to = NULL;
  g_autofree char *config = NULL;
  g_autofree char *output = NULL;
  g_autofree char *error_txt = NULL;
  Case *c = g_new0 (Case, 1);

  c->name = g_strdup (name);
  c->dir = g_build_filename (cases_dir, name, NULL);
  args = g_build_filename (c->dir, "args", NULL);
  output = g_build_filename (c->dir, "output.xml", NULL);
  error_txt = g_build_filename (c->dir, "error.txt", NULL);

  if (!g_key_file_load_from_file (kf, args, G_KEY_FILE_NONE, error))
    goto fail;
  to = g_key_file_get_string (kf, "golden", "to", NULL);
  c->saved = g_strcmp0 (to, "saved") == 0;
  if (c->saved)
    c->form = VA_FORM_ACCELERATED;
  else if (!va_form_from_string (to ? to : "accelerated", &c->form))
    {
      g_set_error (error, VA_ERROR, VA_ERROR_INVALID_ARGUMENT, "%s: to='%s' is not accelerated, portable or saved", args, to);
      goto fail;
    }
  config = g_key_file_get_string (kf, "golden", "config", error);
  if (!config)
    goto fail;
  c->config_dir = g_build_filename (config_root, config, NULL);
  c->capacity = g_key_file_get_string_list (kf, "golden", "capacity", NULL, NULL);
  c->pad_to = g_key_file_get_uint64 (kf, "golden", "pad-to", NULL);
  c->schema_invalid = g_key_file_get_boolean (kf, "golden", "schema-invalid", NULL);
  c->no_portable_form = g_key_file_get_boolean (kf, "golden", "no-portable-form", NULL);
  c->member = g_key_file_get_string (kf, "golden", "member", NULL);
  c->has_output = g_file_test (output, G_FILE_TEST_EXISTS);
  if (!regenerate && c->has_output == g_file_test (error_txt, G_FILE_TEST_EXISTS))
    {
      g_set_error (error, VA_ERROR, VA_ERROR_INVALID_ARGUMENT, "%s: needs exactly one of output.xml and error.txt", c->dir);
      goto fail;
    }
  return c;

fail:
  case_free (c);
  return NULL;
}

/* The case's input, padded with a trailing comment to pad-to bytes: large
 * documents are made here rather than kept in the tree. */
static char *
case_input (const Case *c, gsize *len)
{
  g_autofree char *path = g_build_filename (c->dir, "input.xml", NULL);
  g_autoptr (GError) error = NULL;
  char *data = NULL;

  if (!g_file_get_contents (path, &data, len, &error))
    g_error ("%s", error->message);
  if (c->pad_to > *len + 8)
    {
      gsize fill = c->pad_to - *len - 8; /* "<!--" "-->\n" */
      GString *s = g_string_sized_new (c->pad_to + 1);

      g_string_append_len (s, data, *len);
      g_string_append (s, "<!--");
      for (gsize i = 0; i < fill; i++)
        g_string_append_c (s, 'x');
      g_string_append (s, "-->\n");
      g_free (data);
      *len = s->len;
      g_assert_cmpuint (*len, ==, c->pad_to);
      data = g_string_free (s, FALSE);
    }
  return data;
}

static VaHostView *
case_view (const Case *c, gboolean with_capacity)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (VaConfig) config = va_config_load (c->config_dir, &error);
  g_autoptr (VaHostView) view = NULL;

  g_assert_no_error (error);
  view = va_config_to_host_view (config, PORT_ROOT);
  for (guint i = 0; with_capacity && c->capacity && c->capacity[i]; i++)
    {
      const char *eq = strchr (c->capacity[i], '=');
      g_autofree char *pool = NULL;

      g_assert_nonnull (eq);
      pool = g_strndup (c->capacity[i], eq - c->capacity[i]);
      va_host_view_set_pool_free (view, pool, g_ascii_strtoll (eq + 1, NULL, 10), &error);
      g_assert_no_error (error);
    }
  return g_steal_pointer (&view);
}

static char *
case_file (const Case *c, const char *name)
{
  return g_build_filename (c->dir, name, NULL);
}

static gboolean
write_file (const char *path, const char *data, gsize len)
{
  g_autoptr (GError) error = NULL;

  if (!g_file_set_contents (path, data, len, &error))
    g_error ("%s", error->message);
  return TRUE;
}

/* Byte-for-byte; on a mismatch the actual bytes land next to the build so
 * that `diff` shows what changed. */
static void
assert_same_bytes (const char *what, const char *expected_path, const char *actual, gsize actual_len)
{
  g_autofree char *expected = NULL;
  gsize expected_len = 0;
  g_autoptr (GError) error = NULL;

  if (!g_file_get_contents (expected_path, &expected, &expected_len, &error))
    {
      g_test_fail_printf ("%s: %s", what, error->message);
      return;
    }
  if (expected_len != actual_len || memcmp (expected, actual, actual_len) != 0)
    {
      g_autofree char *base = g_path_get_basename (expected_path);
      g_autofree char *tmpl = g_strdup_printf ("golden-XXXXXX-%s", base);
      g_autofree char *tmp = NULL;
      int fd = g_file_open_tmp (tmpl, &tmp, NULL);

      if (fd >= 0)
        {
          close (fd);
          write_file (tmp, actual, actual_len);
        }
      g_test_fail_printf ("%s differs from %s; got: diff -u %s %s", what, expected_path, expected_path, tmp ? tmp : "(none)");
    }
}

static char *
rewrite (const char *xml, gsize len, const VaHostView *view, VaForm form, GError **error)
{
  return va_domain_rewrite_xml (xml, len, view, form, error);
}

/* @xml with the transient member of each failover standby on @vf put at
 * the end of <devices>, indented as libvirt shows a live domain: what the
 * daemon's plug makes of it, for libvirt's schema to judge. The result
 * must parse back with the member's VF as the NIC's. */
static char *
add_members (const char *xml, const VaHostView *view, const char *vf, GError **error)
{
  g_autoptr (VaDomain) domain = va_domain_parse (xml, -1, error);
  g_autoptr (VaDomain) back = NULL;
  g_autoptr (GString) members = g_string_new (NULL);
  const char *end;
  GPtrArray *nics;
  char *out;

  if (!domain)
    return NULL;
  nics = va_domain_get_nics (domain);
  for (guint i = 0; i < nics->len; i++)
    {
      const VaNic *nic = g_ptr_array_index (nics, i);
      g_autofree char *member = NULL;
      g_auto (GStrv) lines = NULL;

      if (!nic->failover)
        continue;
      if (!(member = va_domain_failover_member_xml (domain, view, nic->mac, vf, error)))
        return NULL;
      lines = g_strsplit (member, "\n", -1);
      for (guint l = 0; lines[l]; l++)
        if (*lines[l])
          g_string_append_printf (members, "    %s\n", lines[l]);
    }
  end = strstr (xml, "  </devices>");
  g_assert_nonnull (end);
  out = g_strdup_printf ("%.*s%s%s", (int) (end - xml), xml, members->str, end);
  back = va_domain_parse (out, -1, error);
  g_assert_no_error (*error);
  nics = va_domain_get_nics (back);
  for (guint i = 0; i < nics->len; i++)
    if (((const VaNic *) g_ptr_array_index (nics, i))->failover)
      g_assert_cmpstr (((const VaNic *) g_ptr_array_index (nics, i))->vf, ==, vf);
  return out;
}

/* ---- the expectation ---------------------------------------------------- */

static void
test_case (gconstpointer data)
{
  const Case *c = data;
  g_autoptr (VaHostView) view = case_view (c, TRUE);
  g_autoptr (GError) error = NULL;
  g_autofree char *input = NULL;
  g_autofree char *out = NULL;
  g_autofree char *output_path = case_file (c, "output.xml");
  g_autofree char *error_path = case_file (c, "error.txt");
  gsize len;

  input = case_input (c, &len);
  out = c->saved ? va_domain_rewrite_text (input, len, view, "saved", &error) : rewrite (input, len, view, c->form, &error);
  if (out && c->member)
    {
      char *with = add_members (out, view, c->member, &error);

      g_free (out);
      out = with;
    }
  g_assert_true ((out == NULL) == (error != NULL));

  if (regenerate)
    {
      if (out)
        {
          write_file (output_path, out, strlen (out));
          g_unlink (error_path);
        }
      else
        {
          g_autofree char *line = g_strdup_printf ("%s\n", error->message);
          write_file (error_path, line, strlen (line));
          g_unlink (output_path);
        }
      return;
    }

  if (c->has_output)
    {
      if (!out)
        {
          g_test_fail_printf ("expected %s, got the error: %s", output_path, error->message);
          return;
        }
      assert_same_bytes ("output", output_path, out, strlen (out));
    }
  else
    {
      g_autofree char *line = NULL;

      if (out)
        {
          g_test_fail_printf ("expected the error in %s, got a document", error_path);
          return;
        }
      g_assert_true (error->domain == VA_ERROR);
      g_assert_null (strchr (error->message, '\n'));
      line = g_strdup_printf ("%s\n", error->message);
      assert_same_bytes ("error", error_path, line, strlen (line));
    }
}

/* ---- idempotent and reversible ------------------------------------------ */

static void
assert_equal_docs (const char *what, const char *a, const char *b)
{
  if (g_strcmp0 (a, b) != 0)
    g_test_fail_printf ("%s:\n--- expected\n%s\n--- got\n%s", what, a, b);
}

static void
test_properties (gconstpointer data)
{
  const Case *c = data;
  g_autoptr (VaHostView) view = case_view (c, FALSE); /* unlimited */
  g_autoptr (GError) error = NULL;
  g_autofree char *input = NULL;
  g_autofree char *a = NULL, *aa = NULL, *p = NULL, *pp = NULL, *pa = NULL, *ap = NULL, *pap = NULL;
  gsize len;

  input = case_input (c, &len);
  a = rewrite (input, len, view, VA_FORM_ACCELERATED, &error);
  if (!a)
    {
      /* only a portable case may have no accelerated form (no <uuid>) */
      g_assert_true (c->form == VA_FORM_PORTABLE);
      g_clear_error (&error);
      p = rewrite (input, len, view, VA_FORM_PORTABLE, &error);
      g_assert_no_error (error);
      pp = rewrite (p, strlen (p), view, VA_FORM_PORTABLE, &error);
      g_assert_no_error (error);
      assert_equal_docs ("portable(portable(I)) == portable(I)", p, pp);
      return;
    }

  aa = rewrite (a, strlen (a), view, VA_FORM_ACCELERATED, &error);
  g_assert_no_error (error);
  assert_equal_docs ("accel(A) == A", a, aa);

  if (c->no_portable_form)
    {
      /* the case says so: then the engine must refuse, not guess a bridge */
      p = rewrite (a, strlen (a), view, VA_FORM_PORTABLE, &error);
      g_assert_error (error, VA_ERROR, VA_ERROR_INVALID_ARGUMENT);
      g_assert_null (p);
      return;
    }
  p = rewrite (a, strlen (a), view, VA_FORM_PORTABLE, &error);
  g_assert_no_error (error);
  pp = rewrite (p, strlen (p), view, VA_FORM_PORTABLE, &error);
  g_assert_no_error (error);
  assert_equal_docs ("portable(portable(A)) == portable(A)", p, pp);

  pa = rewrite (p, strlen (p), view, VA_FORM_ACCELERATED, &error);
  g_assert_no_error (error);
  assert_equal_docs ("accel(portable(A)) == A", a, pa);

  ap = rewrite (pa, strlen (pa), view, VA_FORM_PORTABLE, &error);
  g_assert_no_error (error);
  pap = g_steal_pointer (&ap);
  assert_equal_docs ("portable(accel(P)) == P", p, pap);
}

/* ---- the metadata schema ------------------------------------------------ */

/* Every vdpa:nics element of @path, each validated alone against the
 * schema. Returns how many were invalid; -1 when @path does not parse. */
static int
count_invalid_nics (const char *xml, gsize len, guint *n_found)
{
  xmlDoc *doc = xmlReadMemory (xml, (int) len, "doc.xml", NULL, XML_PARSE_NONET | XML_PARSE_NOERROR | XML_PARSE_NOWARNING);
  xmlNode *root;
  int invalid = 0;

  *n_found = 0;
  if (!doc)
    return -1;
  root = xmlDocGetRootElement (doc);
  for (xmlNode *md = root ? root->children : NULL; md; md = md->next)
    {
      if (md->type != XML_ELEMENT_NODE || xmlStrcmp (md->name, (const xmlChar *) "metadata") != 0)
        continue;
      for (xmlNode *n = md->children; n; n = n->next)
        {
          xmlDoc *sub;
          xmlRelaxNGValidCtxt *vctxt;

          if (n->type != XML_ELEMENT_NODE || !n->ns || xmlStrcmp (n->ns->href, (const xmlChar *) VA_XML_NS) != 0)
            continue;
          (*n_found)++;
          sub = xmlNewDoc ((const xmlChar *) "1.0");
          xmlDocSetRootElement (sub, xmlDocCopyNode (n, sub, 1));
          vctxt = xmlRelaxNGNewValidCtxt (rng_schema);
          xmlRelaxNGSetValidStructuredErrors (vctxt, NULL, NULL);
          if (xmlRelaxNGValidateDoc (vctxt, sub) != 0)
            invalid++;
          xmlRelaxNGFreeValidCtxt (vctxt);
          xmlFreeDoc (sub);
        }
    }
  xmlFreeDoc (doc);
  return invalid;
}

static void
silence (void *ctx, xmlErrorPtr error)
{
}

static void
test_schema (gconstpointer data)
{
  const Case *c = data;
  g_autofree char *input = NULL;
  gsize len;
  guint found = 0;
  int invalid;

  input = case_input (c, &len);
  if (c->has_output)
    {
      g_autofree char *output_path = case_file (c, "output.xml");
      g_autofree char *output = NULL;
      gsize out_len;

      guint found_in_output = 0;

      invalid = count_invalid_nics (input, len, &found);
      g_assert_cmpint (invalid, ==, 0);
      g_assert_true (g_file_get_contents (output_path, &output, &out_len, NULL));
      invalid = count_invalid_nics (output, out_len, &found_in_output);
      g_assert_cmpint (invalid, ==, 0);
      /* the rewrite keeps the metadata */
      g_assert_cmpuint (found_in_output, ==, found);
    }
  else
    {
      /* the engine refuses this metadata; the schema must agree */
      invalid = count_invalid_nics (input, len, &found);
      g_assert_cmpint (invalid, >, 0);
    }
}

/* ---- vdpactl rewrite, end to end ---------------------------------------- */

static void
test_vdpactl (gconstpointer data)
{
  const Case *c = data;
  const char *vdpactl = g_getenv ("VDPACTL");
  g_autoptr (GPtrArray) argv = g_ptr_array_new_with_free_func (g_free);
  g_autoptr (GSubprocessLauncher) launcher = g_subprocess_launcher_new (G_SUBPROCESS_FLAGS_STDOUT_PIPE | G_SUBPROCESS_FLAGS_STDERR_PIPE);
  g_autoptr (GSubprocess) proc = NULL;
  g_autoptr (GBytes) out = NULL;
  g_autoptr (GBytes) err = NULL;
  g_autoptr (GError) error = NULL;
  g_autofree char *input_path = case_file (c, "input.xml");
  g_autofree char *tmp = NULL;
  const char *stderr_text;
  gsize err_len;

  if (!vdpactl)
    {
      g_test_skip ("VDPACTL is not set");
      return;
    }
  if (c->pad_to)
    {
      g_autofree char *input = NULL;
      gsize len;
      int fd = g_file_open_tmp ("golden-XXXXXX-input.xml", &tmp, &error);

      g_assert_no_error (error);
      close (fd);
      input = case_input (c, &len);
      write_file (tmp, input, len);
    }

  g_ptr_array_add (argv, g_strdup (vdpactl));
  g_ptr_array_add (argv, g_strdup ("rewrite"));
  g_ptr_array_add (argv, g_strdup_printf ("--to=%s", va_form_to_string (c->form)));
  g_ptr_array_add (argv, g_strdup_printf ("--config=%s", c->config_dir));
  for (guint i = 0; c->capacity && c->capacity[i]; i++)
    g_ptr_array_add (argv, g_strdup_printf ("--capacity=%s", c->capacity[i]));
  g_ptr_array_add (argv, g_strdup (tmp ? tmp : input_path));
  g_ptr_array_add (argv, NULL);

  g_subprocess_launcher_unsetenv (launcher, "VDPA_ALLOCATOR_RUN_DIR");
  g_subprocess_launcher_unsetenv (launcher, "VDPA_ALLOCATOR_CONFIG_DIR");
  proc = g_subprocess_launcher_spawnv (launcher, (const char *const *) argv->pdata, &error);
  g_assert_no_error (error);
  g_subprocess_communicate (proc, NULL, NULL, &out, &err, &error);
  g_assert_no_error (error);
  if (tmp)
    g_unlink (tmp);
  g_assert_true (g_subprocess_get_if_exited (proc));
  stderr_text = g_bytes_get_data (err, &err_len);

  if (c->has_output)
    {
      g_autofree char *output_path = case_file (c, "output.xml");
      gsize out_len;
      const char *stdout_text = g_bytes_get_data (out, &out_len);

      g_assert_cmpint (g_subprocess_get_exit_status (proc), ==, 0);
      g_assert_cmpuint (err_len, ==, 0);
      assert_same_bytes ("vdpactl stdout", output_path, stdout_text, out_len);
    }
  else
    {
      g_autofree char *line = g_strndup (stderr_text, err_len);
      g_autofree char *error_path = case_file (c, "error.txt");
      g_autofree char *expected = NULL;

      g_assert_cmpint (g_subprocess_get_exit_status (proc), ==, 1);
      g_assert_cmpuint (g_bytes_get_size (out), ==, 0);
      g_assert_true (g_str_has_prefix (line, "vdpactl: "));
      g_assert_true (g_str_has_suffix (line, "\n"));
      g_assert_true (strchr (line, '\n') == line + err_len - 1); /* one line */
      /* an oversized file is refused while reading, in words of its own */
      if (!c->pad_to)
        {
          g_assert_true (g_file_get_contents (error_path, &expected, NULL, NULL));
          if (g_strcmp0 (line + strlen ("vdpactl: "), expected) != 0)
            g_test_fail_printf ("vdpactl stderr differs from %s: %s", error_path, line);
        }
    }
}

/* ---- main --------------------------------------------------------------- */

static gint
cmp_names (gconstpointer a, gconstpointer b)
{
  return strcmp (*(char **) a, *(char **) b);
}

int
main (int argc, char **argv)
{
  const char *srcdir = g_getenv ("VA_SRCDIR");
  g_autoptr (GPtrArray) names = g_ptr_array_new_with_free_func (g_free);
  g_autoptr (GPtrArray) cases = g_ptr_array_new_with_free_func ((GDestroyNotify) case_free);
  g_autoptr (GDir) dir = NULL;
  g_autoptr (GError) error = NULL;
  xmlRelaxNGParserCtxt *pctxt;
  const char *name;
  int ret;

  g_test_init (&argc, &argv, NULL);
  regenerate = g_strcmp0 (g_getenv ("VA_REGENERATE"), "1") == 0;
  if (!srcdir)
    srcdir = ".";
  cases_dir = g_build_filename (srcdir, "tests", "golden", "cases", NULL);
  config_root = g_build_filename (srcdir, "tests", "golden", "config", NULL);
  rng_path = g_build_filename (srcdir, "libvirt-xml", "vdpa-metadata.rng", NULL);

  xmlSetStructuredErrorFunc (NULL, silence);
  pctxt = xmlRelaxNGNewParserCtxt (rng_path);
  rng_schema = xmlRelaxNGParse (pctxt);
  xmlRelaxNGFreeParserCtxt (pctxt);
  if (!rng_schema)
    g_error ("%s: not a RelaxNG schema", rng_path);

  dir = g_dir_open (cases_dir, 0, &error);
  if (!dir)
    g_error ("%s", error->message);
  while ((name = g_dir_read_name (dir)))
    g_ptr_array_add (names, g_strdup (name));
  g_ptr_array_sort (names, cmp_names);

  for (guint i = 0; i < names->len; i++)
    {
      Case *c = case_load (g_ptr_array_index (names, i), &error);
      g_autofree char *path = NULL;

      if (!c)
        g_error ("%s", error->message);
      g_ptr_array_add (cases, c);
      path = g_strdup_printf ("/golden/case/%s", c->name);
      g_test_add_data_func (path, c, test_case);
      if (regenerate)
        continue;
      if (c->has_output)
        {
          g_autofree char *ppath = g_strdup_printf ("/golden/property/%s", c->name);
          g_test_add_data_func (ppath, c, test_properties);
        }
      {
        g_autofree char *spath = g_strdup_printf ("/golden/schema/%s", c->name);
        g_autofree char *vpath = g_strdup_printf ("/golden/vdpactl/%s", c->name);
        if (c->has_output || c->schema_invalid)
          g_test_add_data_func (spath, c, test_schema);
        /* vdpactl rewrite has no --to=saved: only the hook asks for it;
         * nor does it plug failover members */
        if (!c->saved && !c->member)
          g_test_add_data_func (vpath, c, test_vdpactl);
      }
    }

  ret = g_test_run ();
  xmlRelaxNGFree (rng_schema);
  g_free (cases_dir);
  g_free (config_root);
  g_free (rng_path);
  return ret;
}
