/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* What the three parts of the engine share, and no one else sees:
 * va-domain-parse.c (parse and checks, reading), va-domain-rewrite.c (the
 * forms, written back) and va-domain-meta.c (the vdpa:nics metadata as
 * libvirt's metadata API hands it over). */

#include <libxml/tree.h>

#include "va-domain.h"

G_BEGIN_DECLS

struct _VaDomain
{
  xmlDoc *doc;
  gboolean has_decl;
  char *name;
  char *uuid;
  GPtrArray *nics;       /* VaNic* */
  GPtrArray *nic_ifaces; /* xmlNode* of each NIC's <interface>, same index */
  GPtrArray *nic_nodes;  /* xmlNode* of each vdpa:nic, same index */
  xmlNode *nics_node;    /* the vdpa:nics element, or NULL */
  guint shared_memory;   /* VaSharedMemory: what an accelerated form changed in <memoryBacking> */
};

/* What the accelerated rewrite changed in <memoryBacking> so that a
 * software vDPA device's relay reaches guest memory (shared, file-backed),
 * recorded in vdpa:nics shared-memory="..." (one word each, in this
 * order) for the portable rewrite to take back, and only that. */
typedef enum
{
  VA_SHARED_MEMORY_ELEMENT = 1 << 0,   /* "memoryBacking": the element, with the next two */
  VA_SHARED_MEMORY_SOURCE = 1 << 1,    /* "source": <source type='memfd'/> */
  VA_SHARED_MEMORY_ANONYMOUS = 1 << 2, /* "source-anonymous": source type anonymous made memfd */
  VA_SHARED_MEMORY_ACCESS = 1 << 3,    /* "access": <access mode='shared'/> */
  VA_SHARED_MEMORY_PRIVATE = 1 << 4,   /* "access-private": access mode private made shared */
} VaSharedMemory;

#define VA_SHARED_MEMORY_ATTR "shared-memory"

/* The words of @value into @flags; FALSE unless they are what a rewrite
 * writes (va_shared_memory_to_string() of a combination it makes). */
G_GNUC_INTERNAL gboolean va_shared_memory_parse (const char *value, guint *flags);
/* @flags (not 0) as the attribute's words. */
G_GNUC_INTERNAL char *va_shared_memory_to_string (guint flags);

#define XSTR(s) ((const xmlChar *) (s))

/* A document parsed with every guard of va_domain_parse() (size, NUL
 * bytes, attributes and nodes counted first; no DTD, entity or network;
 * depth and namespace names checked after), or NULL with @error. */
G_GNUC_INTERNAL xmlDoc *va_xml_parse (const char *xml, gsize len, GError **error);

/* @node serialized as libxml2 writes it, no formatting added. */
G_GNUC_INTERNAL char *va_xml_node_to_string (xmlNode *node);

/* Element lookups of the domain's own, unnamespaced vocabulary, and of
 * ours (VA_XML_NS). */
static inline gboolean
is_element (const xmlNode *node, const char *name)
{
  return node->type == XML_ELEMENT_NODE && node->ns == NULL && xmlStrcmp (node->name, XSTR (name)) == 0;
}

static inline gboolean
is_va_element (const xmlNode *node)
{
  return node->type == XML_ELEMENT_NODE && node->ns && xmlStrcmp (node->ns->href, XSTR (VA_XML_NS)) == 0;
}

static inline xmlNode *
first_child (const xmlNode *parent, const char *name)
{
  for (xmlNode *c = parent->children; c; c = c->next)
    if (is_element (c, name))
      return c;
  return NULL;
}

static inline xmlNode *
next_element (const xmlNode *node)
{
  for (xmlNode *c = node->next; c; c = c->next)
    if (c->type == XML_ELEMENT_NODE)
      return c;
  return NULL;
}

static inline xmlNode *
first_element_child (const xmlNode *parent)
{
  for (xmlNode *c = parent->children; c; c = c->next)
    if (c->type == XML_ELEMENT_NODE)
      return c;
  return NULL;
}

static inline char *
get_prop (const xmlNode *node, const char *name)
{
  xmlChar *v = xmlGetNoNsProp (node, XSTR (name));
  char *ret = v ? g_strdup ((const char *) v) : NULL;

  xmlFree (v);
  return ret;
}

G_END_DECLS
