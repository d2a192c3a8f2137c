/* SPDX-License-Identifier: LGPL-2.1-or-later */
#define G_LOG_DOMAIN "va-domain"

#include "va-domain.h"

#include <libxml/parser.h>
#include <libxml/tree.h>
#include <libxml/xmlsave.h>
#include <string.h>

#include "va-error.h"
#include "va-ids.h"
#include "va-precheck.h"

struct _VaDomain
{
  xmlDoc *doc;
  gboolean has_decl;
  char *name;
  char *uuid;
  GPtrArray *nics;       /* VaNic* */
  GPtrArray *nic_ifaces; /* xmlNode* of each NIC's <interface>, same index */
  GPtrArray *nic_nodes;  /* xmlNode* of each vdpa:nic, same index */
};

#define XSTR(s) ((const xmlChar *) (s))

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

VA_ENUM_IMPL (va_form, VaForm, VA_FORM_LAST, [VA_FORM_ACCELERATED] = "accelerated", [VA_FORM_PORTABLE] = "portable")

char *
va_port_dir (const char *port_root, const char *uuid)
{
  g_return_val_if_fail (port_root != NULL && uuid != NULL, NULL);
  return g_build_filename (port_root, uuid, NULL);
}

char *
va_port_path (const char *port_root, const char *uuid, const char *mac)
{
  g_autofree char *dir = NULL;

  g_return_val_if_fail (port_root != NULL && uuid != NULL && mac != NULL, NULL);
  dir = va_port_dir (port_root, uuid);
  return g_build_filename (dir, mac, NULL);
}

gboolean
va_domain_text_may_have_intent (const char *xml, gsize len)
{
  return va_text_may_have_intent (xml, len) != 0;
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

static xmlDoc *
parse_xml (const char *xml, gsize len, GError **error)
{
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

static gboolean
is_element (const xmlNode *node, const char *name)
{
  return node->type == XML_ELEMENT_NODE && node->ns == NULL && xmlStrcmp (node->name, XSTR (name)) == 0;
}

static gboolean
is_va_element (const xmlNode *node)
{
  return node->type == XML_ELEMENT_NODE && node->ns && xmlStrcmp (node->ns->href, XSTR (VA_XML_NS)) == 0;
}

static xmlNode *
first_child (const xmlNode *parent, const char *name)
{
  for (xmlNode *c = parent->children; c; c = c->next)
    if (is_element (c, name))
      return c;
  return NULL;
}

static xmlNode *
next_element (const xmlNode *node)
{
  for (xmlNode *c = node->next; c; c = c->next)
    if (c->type == XML_ELEMENT_NODE)
      return c;
  return NULL;
}

static xmlNode *
first_element_child (const xmlNode *parent)
{
  for (xmlNode *c = parent->children; c; c = c->next)
    if (c->type == XML_ELEMENT_NODE)
      return c;
  return NULL;
}

static char *
get_prop (const xmlNode *node, const char *name)
{
  xmlChar *v = xmlGetNoNsProp (node, XSTR (name));
  char *ret = v ? g_strdup ((const char *) v) : NULL;

  xmlFree (v);
  return ret;
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
  if (!va_mac_normalize (raw_mac, mac))
    {
      g_set_error (error, VA_ERROR, VA_ERROR_INVALID_ARGUMENT, "vdpa:nic at line %ld: mac='%.*s' is not a unicast MAC address",
                   xmlGetLineNo (node), VA_CUT (raw_mac, 64));
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
          if (strcmp (value, "no-room") != 0 && strcmp (value, "refused") != 0)
            {
              g_set_error (&local, VA_ERROR, VA_ERROR_INVALID_ARGUMENT, "vdpa:nic %s: swap-back-outcome='%.*s' is not no-room or refused",
                           mac, VA_CUT (value, 64));
              break;
            }
          nic->swap_back_outcome = g_steal_pointer (&value);
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

static gboolean
index_interfaces (xmlNode *root, GHashTable *by_mac, GError **error)
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
      /* NULL value marks a MAC that two interfaces carry */
      if (g_hash_table_contains (by_mac, mac))
        g_hash_table_insert (by_mac, g_strdup (mac), NULL);
      else
        g_hash_table_insert (by_mac, g_strdup (mac), iface);
    }
  return TRUE;
}

/* The sriov form is a NIC on one of our hostdev networks as defined, and
 * the VF libvirt gave it (type='hostdev') in a started domain's XML. */
static VaForm
interface_form (const xmlNode *iface, VaPoolKind *kind)
{
  g_autofree char *type = get_prop (iface, "type");
  xmlNode *source = first_child (iface, "source");
  g_autofree char *network = source ? get_prop (source, "network") : NULL;

  *kind = VA_POOL_KIND_VDPA;
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
  g_autoptr (GHashTable) seen = NULL;
  xmlNode *root, *nics_node, *node;

  g_return_val_if_fail (xml != NULL, NULL);

  self = g_new0 (VaDomain, 1);
  by_mac = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  seen = g_hash_table_new (g_str_hash, g_str_equal);
  if (len < 0)
    len = strlen (xml);
  self->nics = g_ptr_array_new_with_free_func ((GDestroyNotify) nic_free);
  self->nic_ifaces = g_ptr_array_new ();
  self->nic_nodes = g_ptr_array_new ();
  self->has_decl = input_has_decl (xml, len);
  self->doc = parse_xml (xml, len, error);
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

  index_interfaces (root, by_mac, NULL);

  for (xmlAttr *a = nics_node->properties; a; a = a->next)
    {
      g_set_error (error, VA_ERROR, VA_ERROR_INVALID_ARGUMENT, "vdpa:nics: unknown attribute '%.*s'", VA_CUT (a->name, 64));
      return NULL;
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
      nic->form = interface_form (iface, &nic->accel_kind);
      {
        xmlNode *target = first_child (iface, "target");
        xmlNode *source = first_child (iface, "source");

        nic->target_dev = target ? get_prop (target, "dev") : NULL;
        if (nic->form == VA_FORM_ACCELERATED && source)
          nic->source_dev = get_prop (source, "dev");
        if (nic->form == VA_FORM_ACCELERATED && nic->accel_kind == VA_POOL_KIND_SRIOV && source)
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

/* ---- resolving ---------------------------------------------------------- */

gboolean
va_nic_resolve (const VaNic *nic, const VaHostView *view, VaNicPlan *plan, GError **error)
{
  g_return_val_if_fail (nic != NULL, FALSE);
  g_return_val_if_fail (view != NULL, FALSE);
  g_return_val_if_fail (plan != NULL, FALSE);

  memset (plan, 0, sizeof *plan);

  if (nic->network)
    {
      const VaNetwork *net = va_host_view_lookup_network (view, nic->network);

      if (!net)
        {
          g_set_error (error, VA_ERROR, VA_ERROR_NO_SUCH_NETWORK, "NIC %s: no network named '%s'", nic->mac, nic->network);
          return FALSE;
        }
      plan->mode = net->mode;
      plan->pool = net->pool;
      plan->vlan = net->vlan;
      plan->bridge = net->bridge;
      plan->bridge_kind = net->bridge_kind;

      if (nic->mode_set && nic->mode != net->mode)
        {
          /* A NIC may narrow its network's mode, never widen it. */
          gboolean allowed = (net->mode == VA_MODE_AUTO)
                             || ((net->mode == VA_MODE_VDPA || net->mode == VA_MODE_SRIOV) && nic->mode == VA_MODE_AUTO)
                             || (nic->mode == VA_MODE_VIRTIO && net->bridge);
          if (!allowed)
            {
              g_set_error (error, VA_ERROR, VA_ERROR_INVALID_ARGUMENT, "NIC %s: network '%s' is mode %s and forbids mode %s", nic->mac,
                           net->name, va_mode_to_string (net->mode), va_mode_to_string (nic->mode));
              return FALSE;
            }
          plan->mode = nic->mode;
        }
    }
  else
    {
      plan->pool = nic->pool;
      plan->vlan = nic->vlan;
      plan->bridge = nic->bridge;
      plan->bridge_kind = nic->bridge_kind_set ? nic->bridge_kind : VA_BRIDGE_LINUX;
      /* an inline pool's kind says what a NIC without a mode asks for */
      if (nic->mode_set)
        plan->mode = nic->mode;
      else if (!nic->pool)
        plan->mode = VA_MODE_VIRTIO;
      else
        plan->mode = va_host_view_get_pool_kind (view, nic->pool) == VA_POOL_KIND_SRIOV ? VA_MODE_SRIOV : VA_MODE_VDPA;
    }

  if (plan->mode == VA_MODE_VIRTIO)
    plan->pool = NULL;
  else if (!plan->pool)
    {
      g_set_error (error, VA_ERROR, VA_ERROR_INVALID_ARGUMENT, "NIC %s: mode %s needs a pool", nic->mac, va_mode_to_string (plan->mode));
      return FALSE;
    }
  if ((plan->mode == VA_MODE_AUTO || plan->mode == VA_MODE_VIRTIO) && !plan->bridge)
    {
      g_set_error (error, VA_ERROR, VA_ERROR_INVALID_ARGUMENT, "NIC %s: mode %s needs a bridge", nic->mac, va_mode_to_string (plan->mode));
      return FALSE;
    }

  if (plan->pool)
    {
      guint max_vqp;

      if (!va_host_view_has_pool (view, plan->pool))
        {
          g_set_error (error, VA_ERROR, VA_ERROR_NO_SUCH_POOL, "NIC %s: no pool named '%s'", nic->mac, plan->pool);
          return FALSE;
        }
      plan->kind = va_host_view_get_pool_kind (view, plan->pool);
      if ((plan->mode == VA_MODE_VDPA && plan->kind != VA_POOL_KIND_VDPA)
          || (plan->mode == VA_MODE_SRIOV && plan->kind != VA_POOL_KIND_SRIOV))
        {
          g_set_error (error, VA_ERROR, VA_ERROR_INVALID_ARGUMENT, "NIC %s: mode %s needs a pool of kind %s, and pool '%s' is kind %s",
                       nic->mac, va_mode_to_string (plan->mode), plan->mode == VA_MODE_SRIOV ? "sriov" : "vdpa", plan->pool,
                       va_pool_kind_to_string (plan->kind));
          return FALSE;
        }
      if (plan->kind == VA_POOL_KIND_SRIOV)
        {
          if (nic->queues)
            {
              g_set_error (error, VA_ERROR, VA_ERROR_INVALID_ARGUMENT,
                           "NIC %s: queues=%u, but pool '%s' is kind sriov: the guest's own VF driver sets a VF's queues", nic->mac,
                           nic->queues, plan->pool);
              return FALSE;
            }
          plan->representor_vlan = va_host_view_get_pool_representor_vlan (view, plan->pool);
          return TRUE;
        }
      max_vqp = va_host_view_get_pool_max_vqp (view, plan->pool);
      plan->queues = nic->queues ? nic->queues : MAX (max_vqp, 1);
      if (max_vqp && plan->queues > max_vqp)
        {
          g_set_error (error, VA_ERROR, VA_ERROR_INVALID_ARGUMENT, "NIC %s: asks for %u queues, pool '%s' allows %u", nic->mac,
                       plan->queues, plan->pool, max_vqp);
          return FALSE;
        }
    }
  else
    plan->queues = nic->queues;
  return TRUE;
}

/* ---- rewriting ---------------------------------------------------------- */

/* New children go after the last element child, indented like it, and a
 * removed child takes its leading white space along: so an insert followed
 * by a remove gives back the very same bytes, which keeps rewrites
 * reversible. */
static xmlNode *
insert_child (xmlNode *parent, xmlNode *child)
{
  xmlNode *last = NULL;

  for (xmlNode *c = parent->children; c; c = c->next)
    if (c->type == XML_ELEMENT_NODE)
      last = c;
  if (!last)
    return xmlAddChild (parent, child);
  /* element first, then its indentation before it: adding text next to
   * text would merge the two */
  xmlAddNextSibling (last, child);
  if (last->prev && last->prev->type == XML_TEXT_NODE && xmlIsBlankNode (last->prev))
    xmlAddPrevSibling (child, xmlNewDocText (parent->doc, last->prev->content));
  return child;
}

/* Like insert_child, right after @ref. */
static xmlNode *
insert_after (xmlNode *ref, xmlNode *child)
{
  xmlAddNextSibling (ref, child);
  if (ref->prev && ref->prev->type == XML_TEXT_NODE && xmlIsBlankNode (ref->prev))
    xmlAddPrevSibling (child, xmlNewDocText (ref->doc, ref->prev->content));
  return child;
}

static void
remove_child (xmlNode *child)
{
  xmlNode *prev = child->prev;

  if (prev && prev->type == XML_TEXT_NODE && xmlIsBlankNode (prev))
    {
      xmlUnlinkNode (prev);
      xmlFreeNode (prev);
    }
  xmlUnlinkNode (child);
  xmlFreeNode (child);
}

static void
remove_all (xmlNode *parent, const char *name)
{
  xmlNode *c = parent->children;

  while (c)
    {
      xmlNode *next = c->next;
      if (is_element (c, name))
        remove_child (c);
      c = next;
    }
}

static xmlNode *
ensure_child (xmlNode *parent, const char *name)
{
  xmlNode *c = first_child (parent, name);

  if (c)
    return c;
  return insert_child (parent, xmlNewDocNode (parent->doc, NULL, XSTR (name), NULL));
}

/* Replaces <source> in place with an empty one carrying one attribute. */
static void
set_source (xmlNode *iface, const char *attr, const char *value)
{
  xmlNode *old = first_child (iface, "source");
  xmlNode *src = xmlNewDocNode (iface->doc, NULL, XSTR ("source"), NULL);

  xmlNewProp (src, XSTR (attr), XSTR (value));
  if (old)
    {
      xmlReplaceNode (old, src);
      xmlFreeNode (old);
    }
  else
    insert_child (iface, src);
}

static void
set_prop_if_differs (xmlNode *node, const char *name, const char *value)
{
  g_autofree char *cur = get_prop (node, name);

  if (g_strcmp0 (cur, value) != 0)
    xmlSetProp (node, XSTR (name), XSTR (value));
}

static void
unset_prop (xmlNode *node, const char *name)
{
  xmlAttr *a = xmlHasProp (node, XSTR (name));

  if (a)
    xmlRemoveProp (a);
}

static gboolean
vlan_is_single_tag (xmlNode *vlan, guint16 id)
{
  guint tags = 0;
  gboolean match = FALSE;

  if (vlan->properties)
    return FALSE;
  for (xmlNode *c = vlan->children; c; c = c->next)
    {
      if (c->type != XML_ELEMENT_NODE)
        continue;
      if (!is_element (c, "tag"))
        return FALSE;
      tags++;
      {
        g_autofree char *v = get_prop (c, "id");
        g_autofree char *native = get_prop (c, "nativeMode");
        char want[8];
        g_snprintf (want, sizeof want, "%u", id);
        match = g_strcmp0 (v, want) == 0 && native == NULL && c->properties->next == NULL;
      }
    }
  return tags == 1 && match;
}

static char *node_to_string (xmlNode *node);

/* <vlan><tag id/></vlan> as libvirt writes it, indented by @indent (the
 * white space before its siblings; NULL: on one line). */
static xmlNode *
new_vlan (xmlDoc *doc, guint16 id, const xmlChar *indent)
{
  xmlNode *vlan = xmlNewDocNode (doc, NULL, XSTR ("vlan"), NULL);
  xmlNode *tag;
  char text[8];

  if (indent)
    {
      g_autofree char *inner = g_strconcat ((const char *) indent, "  ", NULL);
      xmlAddChild (vlan, xmlNewDocText (doc, XSTR (inner)));
    }
  tag = xmlNewChild (vlan, NULL, XSTR ("tag"), NULL);
  g_snprintf (text, sizeof text, "%u", id);
  xmlNewProp (tag, XSTR ("id"), XSTR (text));
  if (indent)
    xmlAddChild (vlan, xmlNewDocText (doc, indent));
  return vlan;
}

/* One <vlan><tag id/></vlan>, or none for 0; kept as it is when it says
 * so. With @after, it must also be the element right after @after and
 * written as new_vlan() writes it: a form that a portable form without
 * <vlan> must give back byte for byte has it in one place and one
 * spelling, and right after <source>, as libvirt writes it, makes
 * libvirt's own dumpxml that form already. */
static void
set_vlan (xmlNode *iface, guint16 id, xmlNode *after)
{
  xmlNode *vlan = first_child (iface, "vlan");
  xmlNode *want;
  const xmlChar *indent = NULL;

  if (id == 0)
    {
      remove_all (iface, "vlan");
      return;
    }
  if (!after)
    {
      if (!vlan || !vlan_is_single_tag (vlan, id))
        {
          remove_all (iface, "vlan");
          insert_child (iface, new_vlan (iface->doc, id, NULL));
        }
      return;
    }
  if (after->prev && after->prev->type == XML_TEXT_NODE && xmlIsBlankNode (after->prev))
    indent = after->prev->content;
  want = new_vlan (iface->doc, id, indent);
  if (vlan && next_element (after) == vlan)
    {
      g_autofree char *have_text = node_to_string (vlan);
      g_autofree char *want_text = node_to_string (want);

      if (strcmp (have_text, want_text) == 0)
        {
          xmlFreeNode (want);
          return;
        }
    }
  remove_all (iface, "vlan");
  insert_after (after, want);
}

/* A started domain's VF shows <driver name='vfio'/>, which a virtio NIC
 * must not keep. */
static void
drop_vfio_driver (xmlNode *iface)
{
  xmlNode *driver = first_child (iface, "driver");
  g_autofree char *name = driver ? get_prop (driver, "name") : NULL;

  if (g_strcmp0 (name, "vfio") != 0)
    return;
  unset_prop (driver, "name");
  if (!driver->properties && !first_element_child (driver))
    remove_child (driver);
}

static void
to_portable (xmlNode *iface, const VaNicPlan *plan)
{
  set_prop_if_differs (iface, "type", "bridge");
  unset_prop (iface, "managed");
  set_source (iface, "bridge", plan->bridge);
  set_prop_if_differs (ensure_child (iface, "model"), "type", "virtio");
  drop_vfio_driver (iface);

  if (plan->bridge_kind == VA_BRIDGE_OVS)
    {
      xmlNode *vp = first_child (iface, "virtualport");

      if (vp)
        set_prop_if_differs (vp, "type", "openvswitch");
      else
        xmlNewProp (insert_child (iface, xmlNewDocNode (iface->doc, NULL, XSTR ("virtualport"), NULL)), XSTR ("type"),
                    XSTR ("openvswitch"));
      set_vlan (iface, plan->vlan, NULL);
    }
  else
    {
      /* libvirt refuses <vlan> on a Linux bridge: the hook tags the tap. */
      remove_all (iface, "virtualport");
      remove_all (iface, "vlan");
    }
}

static void
to_accelerated (xmlNode *iface, const VaNicPlan *plan, const char *path)
{
  char queues[8];

  set_prop_if_differs (iface, "type", "vdpa");
  unset_prop (iface, "managed");
  set_source (iface, "dev", path);
  set_prop_if_differs (ensure_child (iface, "model"), "type", "virtio");
  /* libvirt refuses these on vdpa interfaces; the allocator applies the VLAN */
  remove_all (iface, "vlan");
  remove_all (iface, "target");
  remove_all (iface, "virtualport");
  drop_vfio_driver (iface);
  g_snprintf (queues, sizeof queues, "%u", plan->queues);
  set_prop_if_differs (ensure_child (iface, "driver"), "queues", queues);
}

/* A VF of the pool's hostdev network: libvirt picks it at start, and sets
 * its MAC and (legacy eswitch) VLAN itself. A hostdev NIC has no model,
 * tap, virtualport or virtio driver options; no port path either. */
static void
to_sriov (xmlNode *iface, const VaNicPlan *plan)
{
  g_autofree char *network = va_sriov_network_name (plan->pool);

  set_prop_if_differs (iface, "type", "network");
  unset_prop (iface, "managed");
  set_source (iface, "network", network);
  remove_all (iface, "model");
  remove_all (iface, "target");
  remove_all (iface, "virtualport");
  remove_all (iface, "driver");
  if (plan->representor_vlan)
    remove_all (iface, "vlan"); /* ours, on the representor */
  else
    set_vlan (iface, plan->vlan, first_child (iface, "source"));
}

/* @keep: a portable NIC stays portable whatever @form says. */
static gboolean
rewrite (VaDomain *self, const VaHostView *view, VaForm form, gboolean keep, GError **error)
{
  g_autoptr (GArray) plans = g_array_sized_new (FALSE, TRUE, sizeof (VaNicPlan), self->nics->len);
  g_autoptr (GArray) forms = g_array_sized_new (FALSE, TRUE, sizeof (VaForm), self->nics->len);
  g_autoptr (GArray) fallbacks = g_array_sized_new (FALSE, TRUE, sizeof (gboolean), self->nics->len);
  g_autoptr (GHashTable) used = g_hash_table_new (g_str_hash, g_str_equal);

  g_array_set_size (plans, self->nics->len);
  g_array_set_size (forms, self->nics->len);
  g_array_set_size (fallbacks, self->nics->len);

  /* Decide everything first, so that an error leaves the document as it was. */
  for (guint i = 0; i < self->nics->len; i++)
    {
      VaNic *nic = g_ptr_array_index (self->nics, i);
      VaNicPlan *plan = &g_array_index (plans, VaNicPlan, i);
      VaForm *want = &g_array_index (forms, VaForm, i);

      if (!va_nic_resolve (nic, view, plan, error))
        return FALSE;

      *want = (form == VA_FORM_ACCELERATED && plan->mode != VA_MODE_VIRTIO && !(keep && nic->form == VA_FORM_PORTABLE))
                ? VA_FORM_ACCELERATED
                : VA_FORM_PORTABLE;
      if (*want == VA_FORM_ACCELERATED)
        {
          gint64 free_slots = va_host_view_get_pool_free (view, plan->pool);
          guint taken = GPOINTER_TO_UINT (g_hash_table_lookup (used, plan->pool));

          if (free_slots >= 0 && taken >= free_slots)
            {
              if (!plan->bridge)
                {
                  g_set_error (error, VA_ERROR, VA_ERROR_POOL_EXHAUSTED, "NIC %s: pool '%s' has no free slot and %s allows no fallback",
                               nic->mac, plan->pool, nic->network ? "its network" : "the NIC");
                  return FALSE;
                }
              *want = VA_FORM_PORTABLE;
              g_array_index (fallbacks, gboolean, i) = TRUE;
            }
          else
            g_hash_table_insert (used, (gpointer) plan->pool, GUINT_TO_POINTER (taken + 1));
        }
      if (*want == VA_FORM_ACCELERATED && plan->kind == VA_POOL_KIND_VDPA && !self->uuid)
        {
          g_set_error (error, VA_ERROR, VA_ERROR_INVALID_XML, "NIC %s: the domain has no <uuid>, which its port path needs", nic->mac);
          return FALSE;
        }
      if (*want == VA_FORM_PORTABLE && !plan->bridge)
        {
          if (nic->network)
            g_set_error (error, VA_ERROR, VA_ERROR_INVALID_ARGUMENT, "NIC %s: network '%s' has no fallback-bridge, so no portable form",
                         nic->mac, nic->network);
          else
            g_set_error (error, VA_ERROR, VA_ERROR_INVALID_ARGUMENT, "NIC %s: names no bridge, so it has no portable form", nic->mac);
          return FALSE;
        }
    }

  for (guint i = 0; i < self->nics->len; i++)
    {
      VaNic *nic = g_ptr_array_index (self->nics, i);
      xmlNode *iface = g_ptr_array_index (self->nic_ifaces, i);
      const VaNicPlan *plan = &g_array_index (plans, VaNicPlan, i);

      nic->form = g_array_index (forms, VaForm, i);
      nic->fallback = g_array_index (fallbacks, gboolean, i);
      nic->accel_kind = plan->kind;
      /* a restore or an incoming migration: a new host, a new try (the
       * outcome was another host's, or an earlier start's) */
      if (keep && nic->swap_back_outcome)
        {
          unset_prop (g_ptr_array_index (self->nic_nodes, i), "swap-back-outcome");
          g_clear_pointer (&nic->swap_back_outcome, g_free);
        }
      /* the wish is granted: the next move marks it again if need be */
      if (nic->form == VA_FORM_ACCELERATED && nic->swap_back)
        {
          unset_prop (g_ptr_array_index (self->nic_nodes, i), "swap-back");
          unset_prop (g_ptr_array_index (self->nic_nodes, i), "swap-back-outcome");
          nic->swap_back = FALSE;
          g_clear_pointer (&nic->swap_back_outcome, g_free);
        }
      if (nic->form == VA_FORM_ACCELERATED && plan->kind == VA_POOL_KIND_SRIOV)
        to_sriov (iface, plan);
      else if (nic->form == VA_FORM_ACCELERATED)
        {
          g_autofree char *path = va_port_path (va_host_view_get_port_root (view), self->uuid, nic->mac);
          to_accelerated (iface, plan, path);
        }
      else
        to_portable (iface, plan);
    }
  return TRUE;
}

char *
va_domain_to_string (const VaDomain *self, gsize *len)
{
  xmlBuffer *buf;
  xmlSaveCtxt *save;
  int options;
  const char *encoding;
  const xmlChar *doc_encoding;
  char *out;

  g_return_val_if_fail (self != NULL, NULL);

  buf = xmlBufferCreate ();
  options = XML_SAVE_AS_XML | (self->has_decl ? 0 : XML_SAVE_NO_DECL);
  encoding = (const char *) self->doc->encoding;

  /* The result is a C string, and goes to libvirt and over D-Bus: UTF-8,
   * never the document's own UTF-16 (whose NUL bytes would cut it short)
   * or Latin-1. A declaration then names UTF-8. Without a declaration the
   * output must be what a document without one gives, ASCII with character
   * references, or the next rewrite would not give the same bytes; libxml2
   * escapes attributes by the document's encoding, so that goes too while
   * saving. */
  if (!self->has_decl)
    encoding = NULL;
  else if (encoding && g_ascii_strcasecmp (encoding, "UTF-8") != 0)
    encoding = "UTF-8";
  doc_encoding = self->doc->encoding;
  if (!encoding)
    self->doc->encoding = NULL;
  save = xmlSaveToBuffer (buf, encoding, options);
  xmlSaveDoc (save, self->doc);
  xmlSaveClose (save);
  self->doc->encoding = doc_encoding;
  if (len)
    *len = xmlBufferLength (buf);
  out = g_strndup ((const char *) xmlBufferContent (buf), xmlBufferLength (buf));
  xmlBufferFree (buf);
  return out;
}

gboolean
va_domain_rewrite (VaDomain *self, const VaHostView *view, VaForm form, GError **error)
{
  g_return_val_if_fail (self != NULL, FALSE);
  g_return_val_if_fail (view != NULL, FALSE);
  g_return_val_if_fail ((guint) form < VA_FORM_LAST, FALSE);

  return rewrite (self, view, form, FALSE, error);
}

gboolean
va_domain_rewrite_saved (VaDomain *self, const VaHostView *view, GError **error)
{
  g_return_val_if_fail (self != NULL, FALSE);
  g_return_val_if_fail (view != NULL, FALSE);

  return rewrite (self, view, VA_FORM_ACCELERATED, TRUE, error);
}

char *
va_domain_rewrite_xml (const char *xml, gssize len, const VaHostView *view, VaForm form, GError **error)
{
  g_autoptr (VaDomain) domain = NULL;

  g_return_val_if_fail (xml != NULL, NULL);
  g_return_val_if_fail (view != NULL, NULL);
  g_return_val_if_fail ((guint) form < VA_FORM_LAST, NULL);

  domain = va_domain_parse (xml, len, error);
  if (!domain || !va_domain_rewrite (domain, view, form, error))
    return NULL;
  return va_domain_to_string (domain, NULL);
}

/* ---- hot-plug helpers ---------------------------------------------------- */

static char *
node_to_string (xmlNode *node)
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
  if (!va_mac_normalize (mac, want))
    {
      g_set_error (error, VA_ERROR, VA_ERROR_INVALID_ARGUMENT, "'%.*s' is not a unicast MAC address", VA_CUT (mac, 64));
      return NULL;
    }
  for (xmlNode *iface = devices ? devices->children : NULL; iface; iface = iface->next)
    {
      xmlNode *m;
      g_autofree char *raw = NULL;
      char have[VA_MAC_STRING_LEN];

      if (!is_element (iface, "interface") || !(m = first_child (iface, "mac")))
        continue;
      raw = get_prop (m, "address");
      if (raw && va_mac_normalize (raw, have) && strcmp (have, want) == 0)
        return node_to_string (iface);
    }
  g_set_error (error, VA_ERROR, VA_ERROR_NOT_FOUND, "the domain has no interface with MAC %s", want);
  return NULL;
}

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
  g_autoptr (GString) out = g_string_new ("<nics>");
  xmlDoc *doc;
  xmlNode *root;
  char want[VA_MAC_STRING_LEN];
  gboolean found = FALSE;

  g_return_val_if_fail (current != NULL, NULL);
  g_return_val_if_fail (mac != NULL, NULL);

  if (!va_mac_normalize (mac, want))
    {
      g_set_error (error, VA_ERROR, VA_ERROR_INVALID_ARGUMENT, "'%.*s' is not a unicast MAC address", VA_CUT (mac, 64));
      return NULL;
    }
  if (outcome && strcmp (outcome, "no-room") != 0 && strcmp (outcome, "refused") != 0)
    {
      g_set_error (error, VA_ERROR, VA_ERROR_INVALID_ARGUMENT, "'%.*s' is not a swap-back outcome", VA_CUT (outcome, 64));
      return NULL;
    }
  if (on)
    extra = outcome ? g_strdup_printf (" swap-back=\"accelerated\" swap-back-outcome=\"%s\"", outcome)
                    : g_strdup (" swap-back=\"accelerated\"");
  if (!(doc = parse_xml (current, strlen (current), error)))
    return NULL;
  if (!(root = metadata_root (doc, error)))
    {
      xmlFreeDoc (doc);
      return NULL;
    }
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

char *
va_metadata_update (const char *current, const char *mac, const char *network, GError **error)
{
  /* as libvirt's metadata API takes it: no namespace, which libvirt puts on
   * the element and every child itself */
  g_autoptr (GString) out = g_string_new ("<nics>");
  xmlDoc *doc = NULL;
  xmlNode *root;
  char want[VA_MAC_STRING_LEN];
  gboolean found = FALSE;

  g_return_val_if_fail (mac != NULL, NULL);

  if (!va_mac_normalize (mac, want))
    {
      g_set_error (error, VA_ERROR, VA_ERROR_INVALID_ARGUMENT, "'%.*s' is not a unicast MAC address", VA_CUT (mac, 64));
      return NULL;
    }
  if (network && !va_name_is_valid (network))
    {
      g_set_error (error, VA_ERROR, VA_ERROR_INVALID_ARGUMENT, "'%.*s' is not a network name", VA_CUT (network, 64));
      return NULL;
    }
  if (current && !(doc = parse_xml (current, strlen (current), error)))
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

char *
va_domain_rewrite_text (const char *xml, gssize len, const VaHostView *view, const char *to, GError **error)
{
  g_autoptr (VaDomain) domain = NULL;
  gboolean saved = g_strcmp0 (to, "saved") == 0;
  VaForm form = VA_FORM_ACCELERATED;

  g_return_val_if_fail (xml != NULL, NULL);
  g_return_val_if_fail (view != NULL, NULL);

  if (!saved && g_strcmp0 (to, "auto") != 0 && !va_form_from_string (to, &form))
    {
      g_set_error (error, VA_ERROR, VA_ERROR_INVALID_ARGUMENT, "'%.*s' is not accelerated, portable, auto or saved",
                   VA_CUT (to ? to : "", 64));
      return NULL;
    }
  domain = va_domain_parse (xml, len, error);
  if (!domain || !(saved ? va_domain_rewrite_saved (domain, view, error) : va_domain_rewrite (domain, view, form, error)))
    return NULL;
  return va_domain_to_string (domain, NULL);
}
