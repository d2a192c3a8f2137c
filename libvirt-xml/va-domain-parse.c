/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The domain document read: parse with its guards, the checks of the
 * vdpa:nics metadata, and what a caller reads out of it. */
#define G_LOG_DOMAIN "va-domain-parse"

#include "va-domain.h"

#include <libxml/parser.h>
#include <string.h>

#include "va-domain-private.h"
#include "va-error.h"
#include "va-ids.h"
#include "va-precheck.h"

static void
nic_free (VaNic *nic)
{
  g_free (nic->mac);
  g_free (nic->network);
  g_free (nic->pool);
  g_free (nic->bridge);
  g_free (nic->target_dev);
  g_free (nic->source_dev);
  g_free (nic->vf);
  g_free (nic->swap_back_outcome);
  g_free (nic->alias);
  g_free (nic->standby_alias);
  g_free (nic);
}

void
va_domain_free (VaDomain *self)
{
  if (!self)
    return;
  if (self->doc)
    xmlFreeDoc (self->doc);
  g_free (self->name);
  g_free (self->uuid);
  g_clear_pointer (&self->nics, g_ptr_array_unref);
  g_clear_pointer (&self->nic_ifaces, g_ptr_array_unref);
  g_clear_pointer (&self->nic_nodes, g_ptr_array_unref);
  g_free (self);
}

gboolean
va_domain_text_may_have_intent (const char *xml, gsize len)
{
  return va_text_may_have_intent (xml, len) != 0;
}

/* ---- the shared-memory record ------------------------------------------- */

static const char *const shared_memory_words[] = { "memoryBacking", "source", "source-anonymous", "access", "access-private" };

gboolean
va_shared_memory_parse (const char *value, guint *flags)
{
  g_auto (GStrv) words = NULL;
  guint out = 0;

  /* a handful of words: anything longer is no record of ours */
  if (!value || strlen (value) > 128)
    return FALSE;
  words = g_strsplit (value, " ", -1);
  for (guint i = 0; words[i]; i++)
    {
      guint bit = 0;

      for (guint w = 0; w < G_N_ELEMENTS (shared_memory_words); w++)
        if (strcmp (words[i], shared_memory_words[w]) == 0)
          bit = 1u << w;
      if (!bit || (out & bit))
        return FALSE;
      out |= bit;
    }
  /* the element comes with both of its children; a source or an access
   * is added or changed, not both; and in the order written */
  if (!out || ((out & VA_SHARED_MEMORY_ELEMENT) && out != (VA_SHARED_MEMORY_ELEMENT | VA_SHARED_MEMORY_SOURCE | VA_SHARED_MEMORY_ACCESS))
      || ((out & VA_SHARED_MEMORY_SOURCE) && (out & VA_SHARED_MEMORY_ANONYMOUS))
      || ((out & VA_SHARED_MEMORY_ACCESS) && (out & VA_SHARED_MEMORY_PRIVATE)))
    return FALSE;
  {
    g_autofree char *canonical = va_shared_memory_to_string (out);

    if (strcmp (canonical, value) != 0)
      return FALSE;
  }
  *flags = out;
  return TRUE;
}

char *
va_shared_memory_to_string (guint flags)
{
  GString *s = g_string_new (NULL);

  for (guint w = 0; w < G_N_ELEMENTS (shared_memory_words); w++)
    if (flags & (1u << w))
      g_string_append_printf (s, "%s%s", s->len ? " " : "", shared_memory_words[w]);
  return g_string_free (s, FALSE);
}

/* ---- parsing ------------------------------------------------------------ */

typedef struct
{
  gboolean saw_dtd;
} ParseGuard;

static void
refuse_internal_subset (void *user_data, const xmlChar *name, const xmlChar *external_id, const xmlChar *system_id)
{
  xmlParserCtxt *ctxt = user_data;
  ParseGuard *guard = ctxt->_private;

  guard->saw_dtd = TRUE;
  xmlStopParser (ctxt);
}

static gboolean
input_has_decl (const char *xml, gsize len)
{
  if (len >= 3 && memcmp (xml, "\xEF\xBB\xBF", 3) == 0)
    {
      xml += 3;
      len -= 3;
    }
  return len >= 6 && memcmp (xml, "<?xml", 5) == 0 && g_ascii_isspace (xml[5]);
}

/* What the parser lets through but the document must not hold: elements
 * 257 deep (libxml2 refuses one only when 256 are already open), and a
 * namespace name with '<' or '&', which libxml2 writes back unescaped, so
 * that its own output would not parse. One walk over the tree. */
static gboolean
check_tree (xmlNode *root, GError **error)
{
  xmlNode *n = root;
  guint depth = 1;

  while (n)
    {
      if (n->type == XML_ELEMENT_NODE)
        {
          if (depth > VA_XML_MAX_DEPTH)
            {
              g_set_error (error, VA_ERROR, VA_ERROR_INVALID_XML, "document is nested deeper than %d elements", VA_XML_MAX_DEPTH);
              return FALSE;
            }
          for (xmlNs *ns = n->nsDef; ns; ns = ns->next)
            if (ns->href && strpbrk ((const char *) ns->href, "<&"))
              {
                g_set_error (error, VA_ERROR, VA_ERROR_INVALID_XML, "namespace name '%.*s' holds '<' or '&', which cannot be written back",
                             VA_CUT (ns->href, 64));
                return FALSE;
              }
        }
      if (n->type == XML_ELEMENT_NODE && n->children)
        {
          n = n->children;
          depth++;
          continue;
        }
      while (n != root && !n->next)
        {
          n = n->parent;
          depth--;
        }
      n = n == root ? NULL : n->next;
    }
  return TRUE;
}

/* A linear pass over the text before libxml2 sees it: refuses a NUL byte,
 * more than VA_XML_MAX_ATTRS attributes on one element and more than
 * VA_XML_MAX_NODES markup nodes. Comments, CDATA, processing instructions
 * and the DOCTYPE are skipped, quoted values too; the parser judges the
 * rest, so this only needs to count no less than libxml2 would build. */
static gboolean
check_text (const char *xml, gsize len, GError **error)
{
  const char *p = xml, *end = xml + len;
  guint nodes = 0;

  if (memchr (xml, '\0', len))
    {
      g_set_error_literal (error, VA_ERROR, VA_ERROR_INVALID_XML, "document contains a NUL byte");
      return FALSE;
    }
  while ((p = memchr (p, '<', end - p)))
    {
      const char *close = NULL;
      guint attrs = 0;
      char quote = 0;

      p++;
      if (++nodes > VA_XML_MAX_NODES)
        {
          g_set_error (error, VA_ERROR, VA_ERROR_INVALID_XML, "document has more than %d elements and other nodes", VA_XML_MAX_NODES);
          return FALSE;
        }
      if (end - p >= 3 && memcmp (p, "!--", 3) == 0)
        close = g_strstr_len (p + 3, end - p - 3, "-->");
      else if (end - p >= 8 && memcmp (p, "![CDATA[", 8) == 0)
        close = g_strstr_len (p + 8, end - p - 8, "]]>");
      else if (p < end && (*p == '?' || *p == '!' || *p == '/'))
        close = memchr (p, '>', end - p);
      if (close || (p < end && (*p == '?' || *p == '!' || *p == '/')))
        {
          if (!close)
            break; /* unterminated: the parser says so */
          p = close + 1;
          continue;
        }
      for (; p < end; p++)
        {
          if (quote)
            {
              if (*p == quote)
                quote = 0;
            }
          else if (*p == '"' || *p == '\'')
            quote = *p;
          else if (*p == '=')
            {
              if (++attrs > VA_XML_MAX_ATTRS)
                {
                  g_set_error (error, VA_ERROR, VA_ERROR_INVALID_XML, "an element has more than %d attributes", VA_XML_MAX_ATTRS);
                  return FALSE;
                }
            }
          else if (*p == '>' || *p == '<')
            break;
        }
    }
  return TRUE;
}

xmlDoc *
va_xml_parse (const char *xml, gsize len, GError **error)
{
  static gsize xml_ready = 0;
  xmlParserCtxt *ctxt;
  xmlDoc *doc;
  ParseGuard guard = { FALSE };
  const xmlError *err;

  if (len > VA_XML_MAX_SIZE)
    {
      g_set_error (error, VA_ERROR, VA_ERROR_INVALID_XML, "document is %" G_GSIZE_FORMAT " bytes, over the limit of %d", len,
                   VA_XML_MAX_SIZE);
      return NULL;
    }
  if (len > G_MAXINT)
    return NULL;
  if (!check_text (xml, len, error))
    return NULL;

  /* libxml2 2.9 sets up its globals lazily and without a lock: two threads
   * parsing first at once each make a global mutex and one leaks. */
  if (g_once_init_enter (&xml_ready))
    {
      xmlInitParser ();
      g_once_init_leave (&xml_ready, 1);
    }

  ctxt = xmlNewParserCtxt ();
  if (!ctxt)
    {
      g_set_error_literal (error, VA_ERROR, VA_ERROR_FAILED, "out of memory creating the XML parser");
      return NULL;
    }
  ctxt->_private = &guard;
  ctxt->sax->internalSubset = refuse_internal_subset;
  ctxt->sax->externalSubset = NULL;

  /* No entity substitution, no DTD loading, no network, ever; libxml2's own
   * depth limit (256 without XML_PARSE_HUGE) stands. */
  doc = xmlCtxtReadMemory (ctxt, xml, (int) len, "domain.xml", NULL,
                           XML_PARSE_NONET | XML_PARSE_NOERROR | XML_PARSE_NOWARNING | XML_PARSE_NOXINCNODE);

  if (guard.saw_dtd)
    {
      g_set_error_literal (error, VA_ERROR, VA_ERROR_INVALID_XML, "document has a DTD (<!DOCTYPE>): DTDs and entities are refused");
      g_clear_pointer (&doc, xmlFreeDoc);
    }
  else if (!doc || !ctxt->wellFormed)
    {
      err = xmlCtxtGetLastError (ctxt);
      if (err && err->message && strstr (err->message, "Excessive depth"))
        g_set_error (error, VA_ERROR, VA_ERROR_INVALID_XML, "document is nested deeper than %d elements", VA_XML_MAX_DEPTH);
      else if (err && err->message)
        {
          /* one line, whatever libxml2 says */
          g_autofree char *msg = g_strstrip (g_strdelimit (g_strdup (err->message), "\r\n", ' '));
          g_set_error (error, VA_ERROR, VA_ERROR_INVALID_XML, "not well-formed XML at line %d: %s", err->line, msg);
        }
      else
        g_set_error_literal (error, VA_ERROR, VA_ERROR_INVALID_XML, "not well-formed XML");
      g_clear_pointer (&doc, xmlFreeDoc);
    }
  else if (xmlDocGetRootElement (doc) && !check_tree (xmlDocGetRootElement (doc), error))
    g_clear_pointer (&doc, xmlFreeDoc);
  xmlFreeParserCtxt (ctxt);
  return doc;
}

static char *
node_text (const xmlNode *node)
{
  xmlChar *v = xmlNodeGetContent (node);
  char *ret = g_strstrip (g_strdup (v ? (const char *) v : ""));

  xmlFree (v);
  return ret;
}

static gboolean
parse_uint_attr (const char *mac, const char *attr, const char *value, guint min, guint max, guint16 *out, GError **error)
{
  guint64 v;

  if (!g_ascii_string_to_unsigned (value, 10, min, max, &v, NULL))
    {
      g_set_error (error, VA_ERROR, VA_ERROR_INVALID_ARGUMENT, "vdpa:nic %s: %s='%s' is not a number from %u to %u", mac, attr, value, min,
                   max);
      return FALSE;
    }
  *out = (guint16) v;
  return TRUE;
}

static VaNic *
parse_nic (xmlNode *node, GError **error)
{
  g_autofree char *raw_mac = get_prop (node, "mac");
  char mac[VA_MAC_STRING_LEN];
  VaNic *nic;
  g_autoptr (GError) local = NULL;

  if (!raw_mac)
    {
      g_set_error (error, VA_ERROR, VA_ERROR_INVALID_ARGUMENT, "vdpa:nic at line %ld has no mac attribute", xmlGetLineNo (node));
      return NULL;
    }
  if (!va_mac_check (raw_mac, mac, error))
    {
      g_prefix_error (error, "vdpa:nic at line %ld: mac=", xmlGetLineNo (node));
      return NULL;
    }

  nic = g_new0 (VaNic, 1);
  nic->mac = g_strdup (mac);

  for (xmlAttr *a = node->properties; a; a = a->next)
    {
      const char *name = (const char *) a->name;
      g_autofree char *value = NULL;

      if (a->ns)
        {
          g_set_error (&local, VA_ERROR, VA_ERROR_INVALID_ARGUMENT, "vdpa:nic %s: unknown attribute '%s:%s'", mac, a->ns->prefix, name);
          break;
        }
      value = get_prop (node, name);
      if (strcmp (name, "mac") == 0)
        continue;
      else if (strcmp (name, "network") == 0 || strcmp (name, "pool") == 0)
        {
          if (!va_name_is_valid (value))
            {
              g_set_error (&local, VA_ERROR, VA_ERROR_INVALID_ARGUMENT,
                           "vdpa:nic %s: %s='%.*s' is not a name of 1 to %d letters, digits, '-', '_' or '.'", mac, name,
                           VA_CUT (value, 64), VA_NAME_MAX);
              break;
            }
          if (name[0] == 'n')
            nic->network = g_steal_pointer (&value);
          else
            nic->pool = g_steal_pointer (&value);
        }
      else if (strcmp (name, "mode") == 0)
        {
          if (!va_mode_from_string (value, &nic->mode))
            {
              g_set_error (&local, VA_ERROR, VA_ERROR_INVALID_ARGUMENT, "vdpa:nic %s: mode='%.*s' is not vdpa, sriov, virtio or auto", mac,
                           VA_CUT (value, 64));
              break;
            }
          nic->mode_set = TRUE;
        }
      else if (strcmp (name, "vlan") == 0)
        {
          if (!parse_uint_attr (mac, "vlan", value, 1, VA_VLAN_MAX, &nic->vlan, &local))
            break;
        }
      else if (strcmp (name, "queues") == 0)
        {
          if (!parse_uint_attr (mac, "queues", value, 1, VA_QUEUES_MAX, &nic->queues, &local))
            break;
        }
      else if (strcmp (name, "bridge") == 0)
        {
          if (!va_ifname_is_valid (value))
            {
              g_set_error (&local, VA_ERROR, VA_ERROR_INVALID_ARGUMENT, "vdpa:nic %s: bridge='%.*s' is not an interface name", mac,
                           VA_CUT (value, 64));
              break;
            }
          nic->bridge = g_steal_pointer (&value);
        }
      else if (strcmp (name, "bridge-type") == 0)
        {
          if (!va_bridge_kind_from_string (value, &nic->bridge_kind))
            {
              g_set_error (&local, VA_ERROR, VA_ERROR_INVALID_ARGUMENT, "vdpa:nic %s: bridge-type='%.*s' is not linux or ovs", mac,
                           VA_CUT (value, 64));
              break;
            }
          nic->bridge_kind_set = TRUE;
        }
      else if (strcmp (name, "swap-back") == 0)
        {
          if (strcmp (value, "accelerated") != 0)
            {
              g_set_error (&local, VA_ERROR, VA_ERROR_INVALID_ARGUMENT, "vdpa:nic %s: swap-back='%.*s' is not accelerated", mac,
                           VA_CUT (value, 64));
              break;
            }
          nic->swap_back = TRUE;
        }
      else if (strcmp (name, "swap-back-outcome") == 0)
        {
          if (!va_swap_back_outcome_is_valid (value))
            {
              g_set_error (&local, VA_ERROR, VA_ERROR_INVALID_ARGUMENT,
                           "vdpa:nic %s: swap-back-outcome='%.*s' is not no-room, refused, busy or lost", mac, VA_CUT (value, 64));
              break;
            }
          nic->swap_back_outcome = g_steal_pointer (&value);
        }
      else if (strcmp (name, "standby-alias") == 0)
        {
          g_autofree char *ours = va_standby_alias (mac);

          /* what the failover form writes, and nothing else */
          if (g_strcmp0 (value, ours) != 0)
            {
              g_set_error (&local, VA_ERROR, VA_ERROR_INVALID_ARGUMENT, "vdpa:nic %s: standby-alias='%.*s' is not %s", mac,
                           VA_CUT (value, 64), ours);
              break;
            }
          nic->standby_alias = g_steal_pointer (&value);
        }
      else
        {
          g_set_error (&local, VA_ERROR, VA_ERROR_INVALID_ARGUMENT, "vdpa:nic %s: unknown attribute '%.*s'", mac, VA_CUT (name, 64));
          break;
        }
    }

  if (!local && nic->network && (nic->pool || nic->vlan || nic->bridge || nic->bridge_kind_set))
    g_set_error (&local, VA_ERROR, VA_ERROR_INVALID_ARGUMENT,
                 "vdpa:nic %s: network='%s' cannot be combined with pool, vlan, bridge or bridge-type", mac, nic->network);
  if (!local && !nic->network && !nic->pool && !nic->bridge)
    g_set_error (&local, VA_ERROR, VA_ERROR_INVALID_ARGUMENT, "vdpa:nic %s: names no network, and no pool or bridge inline", mac);
  if (!local && nic->swap_back_outcome && !nic->swap_back)
    g_set_error (&local, VA_ERROR, VA_ERROR_INVALID_ARGUMENT, "vdpa:nic %s: swap-back-outcome without swap-back", mac);
  if (!local && nic->bridge_kind_set && !nic->bridge)
    g_set_error (&local, VA_ERROR, VA_ERROR_INVALID_ARGUMENT, "vdpa:nic %s: bridge-type without bridge", mac);

  if (local)
    {
      nic_free (nic);
      g_propagate_error (error, g_steal_pointer (&local));
      return NULL;
    }
  return nic;
}

static xmlNode *
find_metadata_nics (xmlNode *root, GError **error)
{
  xmlNode *found = NULL;

  for (xmlNode *md = root->children; md; md = md->next)
    {
      if (!is_element (md, "metadata"))
        continue;
      for (xmlNode *c = md->children; c; c = c->next)
        {
          if (!is_va_element (c))
            continue;
          if (xmlStrcmp (c->name, XSTR ("nics")) != 0)
            {
              g_set_error (error, VA_ERROR, VA_ERROR_INVALID_ARGUMENT, "unknown element vdpa:%.*s in <metadata>", VA_CUT (c->name, 64));
              return NULL;
            }
          if (found)
            {
              g_set_error_literal (error, VA_ERROR, VA_ERROR_INVALID_ARGUMENT, "more than one vdpa:nics element in <metadata>");
              return NULL;
            }
          found = c;
        }
    }
  return found;
}

/* The type of an interface's <teaming>, or NULL. */
static char *
teaming_type (const xmlNode *iface)
{
  xmlNode *teaming = first_child (iface, "teaming");

  return teaming ? get_prop (teaming, "type") : NULL;
}

/* Every <interface> by MAC; the transient members of failover pairs
 * (<teaming type='transient'>), which share their standby's MAC, in
 * @members instead. */
static gboolean
index_interfaces (xmlNode *root, GHashTable *by_mac, GHashTable *members, GError **error)
{
  xmlNode *devices = first_child (root, "devices");

  if (!devices)
    return TRUE;
  for (xmlNode *iface = devices->children; iface; iface = iface->next)
    {
      xmlNode *mac_node;
      g_autofree char *raw = NULL;
      char mac[VA_MAC_STRING_LEN];

      if (!is_element (iface, "interface"))
        continue;
      mac_node = first_child (iface, "mac");
      if (!mac_node)
        continue;
      raw = get_prop (mac_node, "address");
      if (!raw || !va_mac_normalize (raw, mac))
        continue;
      {
        g_autofree char *teaming = teaming_type (iface);
        GHashTable *table = g_strcmp0 (teaming, "transient") == 0 ? members : by_mac;

        /* NULL value marks a MAC that two interfaces carry */
        if (g_hash_table_contains (table, mac))
          g_hash_table_insert (table, g_strdup (mac), NULL);
        else
          g_hash_table_insert (table, g_strdup (mac), iface);
      }
    }
  return TRUE;
}

/* The sriov form is a NIC on one of our hostdev networks as defined, and
 * the VF libvirt gave it (type='hostdev') in a started domain's XML. */
static VaForm
interface_form (const xmlNode *iface, VaPoolKind *kind, gboolean *failover)
{
  g_autofree char *type = get_prop (iface, "type");
  xmlNode *source = first_child (iface, "source");
  g_autofree char *network = source ? get_prop (source, "network") : NULL;
  g_autofree char *teaming = teaming_type (iface);

  *kind = VA_POOL_KIND_VDPA;
  *failover = FALSE;
  /* the failover form: a VF's virtio standby */
  if (g_strcmp0 (teaming, "persistent") == 0)
    {
      *kind = VA_POOL_KIND_SRIOV;
      *failover = TRUE;
      return VA_FORM_ACCELERATED;
    }
  if (g_strcmp0 (type, "vdpa") == 0)
    return VA_FORM_ACCELERATED;
  if (g_strcmp0 (type, "hostdev") == 0
      || (g_strcmp0 (type, "network") == 0 && network && g_str_has_prefix (network, VA_SRIOV_NETWORK_PREFIX)))
    {
      *kind = VA_POOL_KIND_SRIOV;
      return VA_FORM_ACCELERATED;
    }
  return VA_FORM_PORTABLE;
}

static gboolean
parse_hex (const char *s, guint64 max, guint64 *out)
{
  return s && g_str_has_prefix (s, "0x") && g_ascii_string_to_unsigned (s + 2, 16, 0, max, out, NULL);
}

/* The VF and VLAN of a started domain's type='hostdev' NIC; nothing when
 * the address is not a whole PCI one. */
static void
live_vf (const xmlNode *iface, const xmlNode *source, VaNic *nic)
{
  g_autofree char *type = get_prop (iface, "type");
  xmlNode *addr = first_child (source, "address");
  xmlNode *vlan = first_child (iface, "vlan");
  g_autofree char *atype = addr ? get_prop (addr, "type") : NULL;
  g_autofree char *dom = addr ? get_prop (addr, "domain") : NULL;
  g_autofree char *bus = addr ? get_prop (addr, "bus") : NULL;
  g_autofree char *slot = addr ? get_prop (addr, "slot") : NULL;
  g_autofree char *fn = addr ? get_prop (addr, "function") : NULL;
  guint64 d, b, s, f;

  if (g_strcmp0 (type, "hostdev") != 0 || g_strcmp0 (atype, "pci") != 0 || !parse_hex (dom, 0xffff, &d) || !parse_hex (bus, 0xff, &b)
      || !parse_hex (slot, 0x1f, &s) || !parse_hex (fn, 7, &f))
    return;
  nic->vf = g_strdup_printf ("%04x:%02x:%02x.%x", (guint) d, (guint) b, (guint) s, (guint) f);
  for (xmlNode *t = vlan ? vlan->children : NULL; t; t = t->next)
    {
      g_autofree char *id = NULL;
      guint64 n;

      if (t->type != XML_ELEMENT_NODE || strcmp ((const char *) t->name, "tag") != 0)
        continue;
      id = get_prop (t, "id");
      if (nic->vf_vlan || !id || !g_ascii_string_to_unsigned (id, 10, 1, 4094, &n, NULL))
        {
          nic->vf_vlan = G_MAXUINT16;
          return;
        }
      nic->vf_vlan = (guint16) n;
    }
}

static VaDomain *parse_domain (const char *xml, gssize len, gboolean with_nics, GError **error);

VaDomain *
va_domain_parse (const char *xml, gssize len, GError **error)
{
  return parse_domain (xml, len, TRUE, error);
}

VaDomain *
va_domain_parse_identity (const char *xml, gssize len, GError **error)
{
  return parse_domain (xml, len, FALSE, error);
}

static VaDomain *
parse_domain (const char *xml, gssize len, gboolean with_nics, GError **error)
{
  g_autoptr (VaDomain) self = NULL;
  g_autoptr (GHashTable) by_mac = NULL;
  g_autoptr (GHashTable) members = NULL;
  g_autoptr (GHashTable) seen = NULL;
  xmlNode *root, *nics_node, *node;

  g_return_val_if_fail (xml != NULL, NULL);

  self = g_new0 (VaDomain, 1);
  by_mac = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  members = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  seen = g_hash_table_new (g_str_hash, g_str_equal);
  if (len < 0)
    len = strlen (xml);
  self->nics = g_ptr_array_new_with_free_func ((GDestroyNotify) nic_free);
  self->nic_ifaces = g_ptr_array_new ();
  self->nic_nodes = g_ptr_array_new ();
  self->has_decl = input_has_decl (xml, len);
  self->doc = va_xml_parse (xml, len, error);
  if (!self->doc)
    return NULL;

  root = xmlDocGetRootElement (self->doc);
  if (!root || !is_element (root, "domain"))
    {
      g_set_error (error, VA_ERROR, VA_ERROR_INVALID_XML, "root element is <%.*s>, not <domain>",
                   VA_CUT (root ? (const char *) root->name : "", 64));
      return NULL;
    }

  if ((node = first_child (root, "name")))
    self->name = node_text (node);
  if ((node = first_child (root, "uuid")))
    {
      g_autofree char *text = node_text (node);
      char uuid[VA_UUID_STRING_LEN];

      if (!va_uuid_normalize (text, uuid))
        {
          g_set_error (error, VA_ERROR, VA_ERROR_INVALID_XML, "<uuid>%.*s</uuid> is not a UUID", VA_CUT (text, 64));
          return NULL;
        }
      self->uuid = g_strdup (uuid);
    }
  if (!with_nics)
    return g_steal_pointer (&self);

  nics_node = find_metadata_nics (root, error);
  if (!nics_node)
    return (error && *error) ? NULL : g_steal_pointer (&self);

  index_interfaces (root, by_mac, members, NULL);

  self->nics_node = nics_node;
  for (xmlAttr *a = nics_node->properties; a; a = a->next)
    {
      g_autofree char *value = NULL;

      if (a->ns || xmlStrcmp (a->name, XSTR (VA_SHARED_MEMORY_ATTR)) != 0)
        {
          g_set_error (error, VA_ERROR, VA_ERROR_INVALID_ARGUMENT, "vdpa:nics: unknown attribute '%.*s'", VA_CUT (a->name, 64));
          return NULL;
        }
      value = get_prop (nics_node, VA_SHARED_MEMORY_ATTR);
      if (!va_shared_memory_parse (value, &self->shared_memory))
        {
          g_set_error (error, VA_ERROR, VA_ERROR_INVALID_ARGUMENT,
                       "vdpa:nics: " VA_SHARED_MEMORY_ATTR "='%.*s' is not what a rewrite records ('memoryBacking source access', "
                       "or source or source-anonymous, then access or access-private)",
                       VA_CUT (value ? value : "", 64));
          return NULL;
        }
    }

  for (xmlNode *c = nics_node->children; c; c = c->next)
    {
      VaNic *nic;
      xmlNode *iface;

      if (c->type != XML_ELEMENT_NODE)
        {
          if (c->type != XML_COMMENT_NODE && !xmlIsBlankNode (c))
            {
              g_set_error_literal (error, VA_ERROR, VA_ERROR_INVALID_ARGUMENT, "vdpa:nics holds text; only vdpa:nic elements belong there");
              return NULL;
            }
          continue;
        }
      if (!is_va_element (c) || xmlStrcmp (c->name, XSTR ("nic")) != 0)
        {
          g_set_error (error, VA_ERROR, VA_ERROR_INVALID_ARGUMENT, "unknown element <%.*s> in vdpa:nics", VA_CUT (c->name, 64));
          return NULL;
        }
      if (self->nics->len >= VA_XML_MAX_NICS)
        {
          g_set_error (error, VA_ERROR, VA_ERROR_INVALID_ARGUMENT, "more than %d vdpa:nic elements", VA_XML_MAX_NICS);
          return NULL;
        }
      if (c->children)
        {
          g_set_error (error, VA_ERROR, VA_ERROR_INVALID_ARGUMENT, "vdpa:nic at line %ld must be empty", xmlGetLineNo (c));
          return NULL;
        }

      nic = parse_nic (c, error);
      if (!nic)
        return NULL;
      g_ptr_array_add (self->nics, nic);

      if (g_hash_table_contains (seen, nic->mac))
        {
          g_set_error (error, VA_ERROR, VA_ERROR_INVALID_ARGUMENT, "vdpa:nic %s appears twice", nic->mac);
          return NULL;
        }
      g_hash_table_add (seen, nic->mac);

      if (!g_hash_table_lookup_extended (by_mac, nic->mac, NULL, (gpointer *) &iface))
        {
          g_set_error (error, VA_ERROR, VA_ERROR_INVALID_ARGUMENT, "vdpa:nic %s matches no <interface>", nic->mac);
          return NULL;
        }
      if (!iface)
        {
          g_set_error (error, VA_ERROR, VA_ERROR_INVALID_ARGUMENT, "vdpa:nic %s matches more than one <interface>", nic->mac);
          return NULL;
        }
      nic->form = interface_form (iface, &nic->accel_kind, &nic->failover);
      {
        xmlNode *target = first_child (iface, "target");
        xmlNode *source = first_child (iface, "source");
        xmlNode *alias = first_child (iface, "alias");
        xmlNode *member = g_hash_table_lookup (members, nic->mac);

        nic->alias = alias ? get_prop (alias, "name") : NULL;
        /* the standby's VF, when the document shows it plugged */
        if (nic->failover && member && first_child (member, "source"))
          live_vf (member, first_child (member, "source"), nic);
        nic->target_dev = target ? get_prop (target, "dev") : NULL;
        if (nic->form == VA_FORM_ACCELERATED && !nic->failover && source)
          nic->source_dev = get_prop (source, "dev");
        if (nic->form == VA_FORM_ACCELERATED && nic->accel_kind == VA_POOL_KIND_SRIOV && !nic->failover && source)
          live_vf (iface, source, nic);
      }
      g_ptr_array_add (self->nic_ifaces, iface);
      g_ptr_array_add (self->nic_nodes, c);
    }

  return g_steal_pointer (&self);
}

const char *
va_domain_get_name (const VaDomain *self)
{
  g_return_val_if_fail (self != NULL, NULL);

  return self->name;
}

const char *
va_domain_get_uuid (const VaDomain *self)
{
  g_return_val_if_fail (self != NULL, NULL);

  return self->uuid;
}

GPtrArray *
va_domain_get_nics (const VaDomain *self)
{
  g_return_val_if_fail (self != NULL, NULL);

  return self->nics;
}

/* ---- reading out ------------------------------------------------------- */

char *
va_xml_node_to_string (xmlNode *node)
{
  xmlBuffer *buf = xmlBufferCreate ();
  char *out;

  xmlNodeDump (buf, node->doc, node, 0, 0);
  out = g_strndup ((const char *) xmlBufferContent (buf), xmlBufferLength (buf));
  xmlBufferFree (buf);
  return out;
}

char *
va_domain_interface_xml (const VaDomain *self, const char *mac, GError **error)
{
  xmlNode *devices;
  char want[VA_MAC_STRING_LEN];

  g_return_val_if_fail (self != NULL, NULL);
  g_return_val_if_fail (mac != NULL, NULL);

  devices = first_child (xmlDocGetRootElement (self->doc), "devices");
  if (!va_mac_check (mac, want, error))
    return NULL;
  for (xmlNode *iface = devices ? devices->children : NULL; iface; iface = iface->next)
    {
      xmlNode *m;
      g_autofree char *raw = NULL;
      char have[VA_MAC_STRING_LEN];

      g_autofree char *teaming = NULL;

      if (!is_element (iface, "interface") || !(m = first_child (iface, "mac")))
        continue;
      /* a failover pair's VF shares its standby's MAC */
      if (g_strcmp0 ((teaming = teaming_type (iface)), "transient") == 0)
        continue;
      raw = get_prop (m, "address");
      if (raw && va_mac_normalize (raw, have) && strcmp (have, want) == 0)
        return va_xml_node_to_string (iface);
    }
  g_set_error (error, VA_ERROR, VA_ERROR_NOT_FOUND, "the domain has no interface with MAC %s", want);
  return NULL;
}
