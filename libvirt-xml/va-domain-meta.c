/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The vdpa:nics metadata alone, as libvirt's virDomainGetMetadata returns
 * it and virDomainSetMetadata takes it: a NIC added or removed, a NIC's
 * swap-back marker set or dropped, every other NIC kept. */
#define G_LOG_DOMAIN "va-domain-meta"

#include "va-domain.h"

#include <string.h>

#include "va-domain-private.h"
#include "va-error.h"
#include "va-ids.h"

/* A vdpa:nic as text, without its swap-back attributes when @skip_swap_back,
 * then @extra. */
static void
append_nic_except (GString *out, xmlNode *nic, gboolean skip_swap_back, const char *extra)
{
  g_string_append (out, "<nic");
  for (xmlAttr *a = nic->properties; a; a = a->next)
    {
      g_autofree char *value = get_prop (nic, (const char *) a->name);
      g_autofree char *escaped = value ? g_markup_escape_text (value, -1) : NULL;

      if (!a->ns && escaped && !(skip_swap_back && g_str_has_prefix ((const char *) a->name, "swap-back")))
        g_string_append_printf (out, " %s=\"%s\"", (const char *) a->name, escaped);
    }
  if (extra)
    g_string_append (out, extra);
  g_string_append (out, "/>");
}

static void
append_nic (GString *out, xmlNode *nic)
{
  append_nic_except (out, nic, FALSE, NULL);
}

/* "<nics" and the attributes of @root (NULL: none) that a rewrite
 * recorded there (shared-memory, when it parses), then ">": what the
 * metadata API changes of a NIC keeps of the domain's. */
static void
append_nics_open (GString *out, xmlNode *root)
{
  g_autofree char *value = root ? get_prop (root, VA_SHARED_MEMORY_ATTR) : NULL;
  guint flags = 0;

  g_string_append (out, "<nics");
  if (value && va_shared_memory_parse (value, &flags))
    {
      g_autofree char *words = va_shared_memory_to_string (flags);
      g_string_append_printf (out, " " VA_SHARED_MEMORY_ATTR "=\"%s\"", words);
    }
  g_string_append (out, ">");
}

/* The root <nics> of metadata as libvirt's virDomainGetMetadata returns
 * it (without its namespace) or namespaced; NULL with @error else. */
static xmlNode *
metadata_root (xmlDoc *doc, GError **error)
{
  xmlNode *root = xmlDocGetRootElement (doc);

  if (!root || root->type != XML_ELEMENT_NODE || (root->ns && !is_va_element (root)) || xmlStrcmp (root->name, XSTR ("nics")) != 0)
    {
      g_set_error_literal (error, VA_ERROR, VA_ERROR_INVALID_XML, "the domain's vdpa metadata is not a vdpa:nics element");
      return NULL;
    }
  return root;
}

char *
va_metadata_set_swap_back (const char *current, const char *mac, gboolean on, const char *outcome, GError **error)
{
  g_autofree char *extra = NULL;
  g_autoptr (GString) out = g_string_new (NULL);
  xmlDoc *doc;
  xmlNode *root;
  char want[VA_MAC_STRING_LEN];
  gboolean found = FALSE;

  g_return_val_if_fail (current != NULL, NULL);
  g_return_val_if_fail (mac != NULL, NULL);

  if (!va_mac_check (mac, want, error))
    return NULL;
  if (outcome && !va_swap_back_outcome_is_valid (outcome))
    {
      g_set_error (error, VA_ERROR, VA_ERROR_INVALID_ARGUMENT, "'%.*s' is not a swap-back outcome", VA_CUT (outcome, 64));
      return NULL;
    }
  if (on)
    extra = outcome ? g_strdup_printf (" swap-back=\"accelerated\" swap-back-outcome=\"%s\"", outcome)
                    : g_strdup (" swap-back=\"accelerated\"");
  if (!(doc = va_xml_parse (current, strlen (current), error)))
    return NULL;
  if (!(root = metadata_root (doc, error)))
    {
      xmlFreeDoc (doc);
      return NULL;
    }
  append_nics_open (out, root);
  for (xmlNode *c = root->children; c; c = c->next)
    {
      g_autofree char *m = NULL;
      char have[VA_MAC_STRING_LEN];

      if (c->type != XML_ELEMENT_NODE || (c->ns && !is_va_element (c)) || xmlStrcmp (c->name, XSTR ("nic")) != 0)
        continue;
      m = get_prop (c, "mac");
      if (m && va_mac_normalize (m, have) && strcmp (have, want) == 0)
        {
          found = TRUE;
          append_nic_except (out, c, TRUE, extra);
        }
      else
        append_nic (out, c);
    }
  xmlFreeDoc (doc);
  if (!found)
    {
      g_set_error (error, VA_ERROR, VA_ERROR_NOT_FOUND, "the vdpa metadata has no NIC %s", want);
      return NULL;
    }
  g_string_append (out, "</nics>");
  return g_string_free (g_steal_pointer (&out), FALSE);
}

GStrv
va_metadata_lost_macs (const char *current, GError **error)
{
  g_autoptr (GStrvBuilder) b = g_strv_builder_new ();
  xmlDoc *doc;
  xmlNode *root;
  guint n = 0;

  g_return_val_if_fail (current != NULL, NULL);

  if (!(doc = va_xml_parse (current, strlen (current), error)))
    return NULL;
  if (!(root = metadata_root (doc, error)))
    {
      xmlFreeDoc (doc);
      return NULL;
    }
  for (xmlNode *c = root->children; c && n < VA_XML_MAX_NICS; c = c->next)
    {
      g_autofree char *m = NULL;
      g_autofree char *outcome = NULL;
      char have[VA_MAC_STRING_LEN];

      if (c->type != XML_ELEMENT_NODE || (c->ns && !is_va_element (c)) || xmlStrcmp (c->name, XSTR ("nic")) != 0)
        continue;
      m = get_prop (c, "mac");
      outcome = get_prop (c, "swap-back-outcome");
      if (m && va_mac_normalize (m, have) && g_strcmp0 (outcome, "lost") == 0)
        {
          g_strv_builder_add (b, have);
          n++;
        }
    }
  xmlFreeDoc (doc);
  return g_strv_builder_end (b);
}

char *
va_metadata_update (const char *current, const char *mac, const char *network, GError **error)
{
  /* as libvirt's metadata API takes it: no namespace, which libvirt puts on
   * the element and every child itself */
  g_autoptr (GString) out = g_string_new (NULL);
  xmlDoc *doc = NULL;
  xmlNode *root;
  char want[VA_MAC_STRING_LEN];
  gboolean found = FALSE;

  g_return_val_if_fail (mac != NULL, NULL);

  if (!va_mac_check (mac, want, error))
    return NULL;
  if (network && !va_name_is_valid (network))
    {
      g_set_error (error, VA_ERROR, VA_ERROR_INVALID_ARGUMENT, "'%.*s' is not a network name", VA_CUT (network, 64));
      return NULL;
    }
  if (current && !(doc = va_xml_parse (current, strlen (current), error)))
    return NULL;
  root = doc ? xmlDocGetRootElement (doc) : NULL;
  /* libvirt's virDomainGetMetadata hands the element back without its
   * namespace: take <nics><nic/></nics> as well as the namespaced form */
  if (doc && (!root || root->type != XML_ELEMENT_NODE || (root->ns && !is_va_element (root)) || xmlStrcmp (root->name, XSTR ("nics")) != 0))
    {
      xmlFreeDoc (doc);
      g_set_error_literal (error, VA_ERROR, VA_ERROR_INVALID_XML, "the domain's vdpa metadata is not a vdpa:nics element");
      return NULL;
    }
  append_nics_open (out, root);
  for (xmlNode *c = root ? root->children : NULL; c; c = c->next)
    {
      g_autofree char *m = NULL;
      char have[VA_MAC_STRING_LEN];

      if (c->type != XML_ELEMENT_NODE || (c->ns && !is_va_element (c)) || xmlStrcmp (c->name, XSTR ("nic")) != 0)
        continue;
      m = get_prop (c, "mac");
      if (m && va_mac_normalize (m, have) && strcmp (have, want) == 0)
        {
          found = TRUE;
          if (network)
            g_string_append_printf (out, "<nic mac=\"%s\" network=\"%s\"/>", want, network);
          continue;
        }
      append_nic (out, c);
    }
  if (doc)
    xmlFreeDoc (doc);
  if (network && !found)
    g_string_append_printf (out, "<nic mac=\"%s\" network=\"%s\"/>", want, network);
  g_string_append (out, "</nics>");
  return g_string_free (g_steal_pointer (&out), FALSE);
}
