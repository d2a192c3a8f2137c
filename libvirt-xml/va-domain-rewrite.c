/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The forms of a parsed domain: every marked <interface> made accelerated
 * (vdpa or an sriov VF) or portable against a host view, edited so that a
 * rewrite and its reverse give back the same bytes, and written back. */
#define G_LOG_DOMAIN "va-domain-rewrite"

#include "va-domain.h"

#include <libxml/xmlsave.h>
#include <stdio.h>
#include <string.h>

#include "va-domain-private.h"
#include "va-error.h"
#include "va-ids.h"

/* Where the indentation that ends @text begins: at its last newline (at
 * its start when it has none), provided only white space follows; NULL
 * otherwise. */
static const char *
indent_tail (const char *text)
{
  const char *tail = strrchr (text, '\n');

  if (!tail)
    tail = text;
  if (!*tail || tail[strspn (tail, " \t\r\n")] != '\0')
    return NULL;
  return tail;
}

/* The indentation a new sibling of @node takes: the tail of the text
 * before it. Only the tail counts, so text left before it (a stray ")",
 * or two text nodes that a save and parse merge into one) gives the same
 * indentation on every pass; NULL when there is none (one line). */
static char *
indent_before (const xmlNode *node)
{
  const char *tail;

  if (!node->prev || node->prev->type != XML_TEXT_NODE || !node->prev->content)
    return NULL;
  tail = indent_tail ((const char *) node->prev->content);
  return tail ? g_strdup (tail) : NULL;
}

/* Puts @child after @ref, indented like @ref: element first, then the
 * indentation before it, as adding text next to text would merge the two. */
static xmlNode *
insert_after (xmlNode *ref, xmlNode *child)
{
  g_autofree char *indent = indent_before (ref);

  xmlAddNextSibling (ref, child);
  if (indent)
    xmlAddPrevSibling (child, xmlNewDocText (ref->doc, XSTR (indent)));
  return child;
}

/* New children go after the last element child, indented like it, and a
 * removed child takes its indentation along: so an insert followed by a
 * remove gives back the very same bytes, which keeps rewrites
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
  return insert_after (last, child);
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
  else if (prev && prev->type == XML_TEXT_NODE && prev->content)
    {
      const char *text = (const char *) prev->content;
      const char *tail = indent_tail (text);

      /* the text before its indentation stays; copied, as libxml2 frees
       * the old content before it reads the new */
      if (tail)
        {
          g_autofree char *kept = g_strndup (text, tail - text);

          xmlNodeSetContent (prev, XSTR (kept));
        }
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
  g_autofree char *indent = NULL;

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
  indent = indent_before (after);
  want = new_vlan (iface->doc, id, XSTR (indent));
  if (vlan && next_element (after) == vlan)
    {
      g_autofree char *have_text = va_xml_node_to_string (vlan);
      g_autofree char *want_text = va_xml_node_to_string (want);

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

/* ---- the failover form --------------------------------------------------- */

static gboolean is_ours (const xmlNode *node, const char *attr, const char *value);

/* The virtio standby of a failover pair: the portable form with
 * <teaming type='persistent'/> and a user alias, which the transient
 * member (the VF, plugged at run time: va_domain_failover_member_xml())
 * names. An alias of the user's own ("ua-...") is kept and named; else
 * ours goes in its place (libvirt drops other aliases from a defined
 * domain) and vdpa:nic standby-alias records it for the way back. */
static void
to_failover (xmlNode *iface, xmlNode *nic_node, VaNic *nic, const VaNicPlan *plan)
{
  xmlNode *teaming = first_child (iface, "teaming");
  xmlNode *alias = first_child (iface, "alias");
  g_autofree char *name = alias ? get_prop (alias, "name") : NULL;
  g_autofree char *ours = va_standby_alias (nic->mac);

  to_portable (iface, plan);
  if (!teaming || !is_ours (teaming, "type", "persistent"))
    {
      remove_all (iface, "teaming");
      xmlNewProp (insert_child (iface, xmlNewDocNode (iface->doc, NULL, XSTR ("teaming"), NULL)), XSTR ("type"), XSTR ("persistent"));
    }
  if (va_user_alias_is_valid (name) && g_strcmp0 (name, ours) != 0)
    {
      /* the user's own: nothing of ours to take back */
      unset_prop (nic_node, "standby-alias");
      g_clear_pointer (&nic->standby_alias, g_free);
    }
  else
    {
      if (g_strcmp0 (name, ours) != 0 || !alias || alias->properties->next || first_element_child (alias))
        {
          remove_all (iface, "alias");
          xmlNewProp (insert_child (iface, xmlNewDocNode (iface->doc, NULL, XSTR ("alias"), NULL)), XSTR ("name"), XSTR (ours));
        }
      /* ours, whether this rewrite wrote it or an earlier one did */
      if (!nic->standby_alias)
        {
          xmlSetProp (nic_node, XSTR ("standby-alias"), XSTR (ours));
          nic->standby_alias = g_strdup (ours);
        }
    }
  g_free (nic->alias);
  nic->alias = g_strdup (va_user_alias_is_valid (name) ? name : ours);
  nic->failover = TRUE;
}

/* What to_failover() added, taken back for every other form: the
 * <teaming>, and the alias where the record says it is ours. */
static void
drop_failover (xmlNode *iface, xmlNode *nic_node, VaNic *nic)
{
  remove_all (iface, "teaming");
  if (nic->standby_alias)
    {
      for (xmlNode *c = iface->children; c;)
        {
          xmlNode *next = c->next;
          g_autofree char *name = is_element (c, "alias") ? get_prop (c, "name") : NULL;

          if (g_strcmp0 (name, nic->standby_alias) == 0)
            remove_child (c);
          c = next;
        }
      if (g_strcmp0 (nic->alias, nic->standby_alias) == 0)
        g_clear_pointer (&nic->alias, g_free);
      unset_prop (nic_node, "standby-alias");
      g_clear_pointer (&nic->standby_alias, g_free);
    }
  nic->failover = FALSE;
}

/* The transient member of @nic's failover pair, when the document has
 * one (a live domain's, as libvirt writes it into a save image or a
 * migration), taken out: it names a VF of the host the domain left, which
 * no lease here holds; the host it lands on plugs a VF of its own once
 * the domain runs. */
static void
drop_member (VaDomain *self, VaNic *nic)
{
  xmlNode *devices = first_child (xmlDocGetRootElement (self->doc), "devices");

  for (xmlNode *c = devices ? devices->children : NULL; c;)
    {
      xmlNode *next = c->next;
      xmlNode *teaming = is_element (c, "interface") ? first_child (c, "teaming") : NULL;
      xmlNode *m = teaming ? first_child (c, "mac") : NULL;
      g_autofree char *type = teaming ? get_prop (teaming, "type") : NULL;
      g_autofree char *raw = m ? get_prop (m, "address") : NULL;
      char have[VA_MAC_STRING_LEN];

      if (g_strcmp0 (type, "transient") == 0 && raw && va_mac_normalize (raw, have) && strcmp (have, nic->mac) == 0)
        remove_child (c);
      c = next;
    }
  if (nic->failover)
    {
      g_clear_pointer (&nic->vf, g_free);
      nic->vf_vlan = 0;
    }
}

/* Whether the domain's machine can take a failover pair's VF: QEMU puts a
 * failover primary on a PCI Express slot only ("failover primary device
 * must be on PCIExpress bus"), which an i440fx ("pc") machine has none
 * of. @machine: what the document says, or NULL. */
static gboolean
machine_takes_failover (const VaDomain *self, char **machine)
{
  xmlNode *os = first_child (xmlDocGetRootElement (self->doc), "os");
  xmlNode *type = os ? first_child (os, "type") : NULL;

  *machine = type ? get_prop (type, "machine") : NULL;
  return *machine
         && (strcmp (*machine, "q35") == 0 || g_str_has_prefix (*machine, "pc-q35-") || strcmp (*machine, "virt") == 0
             || g_str_has_prefix (*machine, "virt-"));
}

char *
va_domain_failover_member_xml (const VaDomain *self, const VaHostView *view, const char *mac, const char *vf, GError **error)
{
  char want[VA_MAC_STRING_LEN];
  const VaNic *nic = NULL;
  VaNicPlan plan;
  g_autofree char *member = NULL;
  g_autoptr (GString) out = g_string_new (NULL);
  guint dom, bus, slot, fn;
  guint16 vlan;

  g_return_val_if_fail (self != NULL, NULL);
  g_return_val_if_fail (view != NULL, NULL);
  g_return_val_if_fail (mac != NULL, NULL);

  if (!va_mac_check (mac, want, error))
    return NULL;
  for (guint i = 0; i < self->nics->len && !nic; i++)
    if (strcmp (((const VaNic *) g_ptr_array_index (self->nics, i))->mac, want) == 0)
      nic = g_ptr_array_index (self->nics, i);
  if (!nic)
    {
      g_set_error (error, VA_ERROR, VA_ERROR_NOT_FOUND, "no vdpa:nic has MAC %s", want);
      return NULL;
    }
  if (!nic->failover)
    {
      g_set_error (error, VA_ERROR, VA_ERROR_INVALID_ARGUMENT, "NIC %s is not a failover standby (no <teaming type='persistent'/>)", want);
      return NULL;
    }
  if (!va_user_alias_is_valid (nic->alias))
    {
      g_set_error (error, VA_ERROR, VA_ERROR_INVALID_ARGUMENT,
                   "NIC %s: its standby has no user alias (<alias name='ua-...'/>) for the VF to name", want);
      return NULL;
    }
  if (!vf || !va_pci_address_is_valid (vf) || sscanf (vf, "%x:%x:%x.%x", &dom, &bus, &slot, &fn) != 4)
    {
      g_set_error (error, VA_ERROR, VA_ERROR_INVALID_ARGUMENT, "'%.*s' is not a PCI address like 0000:b3:00.2", VA_CUT (vf ? vf : "", 32));
      return NULL;
    }
  if (!va_nic_resolve (nic, view, &plan, error))
    return NULL;
  if (!plan.failover)
    {
      g_set_error (error, VA_ERROR, VA_ERROR_INVALID_ARGUMENT, "NIC %s: %s asks for no failover", want,
                   nic->network ? "its network" : "an inline intent");
      return NULL;
    }
  /* in switchdev the daemon tags the VF's representor: libvirt would fail
   * on a VF VLAN there */
  vlan = plan.representor_vlan ? 0 : plan.vlan;
  member = va_member_alias (want);
  g_string_append_printf (out,
                          "<interface type='hostdev' managed='yes'>\n"
                          "  <mac address='%s'/>\n"
                          "  <source>\n"
                          "    <address type='pci' domain='0x%04x' bus='0x%02x' slot='0x%02x' function='0x%x'/>\n"
                          "  </source>\n",
                          want, dom, bus, slot, fn);
  if (vlan)
    g_string_append_printf (out, "  <vlan>\n    <tag id='%u'/>\n  </vlan>\n", vlan);
  g_string_append_printf (out,
                          "  <teaming type='transient' persistent='%s'/>\n"
                          "  <alias name='%s'/>\n"
                          "</interface>\n",
                          nic->alias, member);
  return g_string_free (g_steal_pointer (&out), FALSE);
}

/* ---- shared guest memory for software devices ---------------------------- */

/* A software vDPA device's relay maps guest memory with VDUSE_IOTLB_GET_FD,
 * which hands out only shared, file-backed memory (memfd, a file, or
 * hugetlbfs): the rest is silently absent from its map, and the NIC moves
 * nothing. So the accelerated form of a domain with a NIC that may get
 * one asks libvirt for such memory, merged with the domain's own
 * <memoryBacking>, and records what it changed for the portable form to
 * take back (and nothing else). */

static xmlNode *
new_element (xmlDoc *doc, const char *name, const char *attr, const char *value)
{
  xmlNode *node = xmlNewDocNode (doc, NULL, XSTR (name), NULL);

  xmlNewProp (node, XSTR (attr), XSTR (value));
  return node;
}

/* Whether @node is <name attr='value'/> and nothing else, as we write it. */
static gboolean
is_ours (const xmlNode *node, const char *attr, const char *value)
{
  g_autofree char *v = get_prop (node, attr);

  return g_strcmp0 (v, value) == 0 && node->properties && !node->properties->next && !first_element_child (node);
}

/* The first NUMA cell whose memAccess says private (which the domain's
 * <access> does not override), or NULL. */
static xmlNode *
private_cell (xmlNode *root)
{
  xmlNode *cpu = first_child (root, "cpu");
  xmlNode *numa = cpu ? first_child (cpu, "numa") : NULL;

  for (xmlNode *c = numa ? numa->children : NULL; c; c = c->next)
    {
      g_autofree char *access = is_element (c, "cell") ? get_prop (c, "memAccess") : NULL;

      if (g_strcmp0 (access, "private") == 0)
        return c;
    }
  return NULL;
}

gboolean
va_domain_memory_is_shared (const VaDomain *self)
{
  xmlNode *root, *mb, *src, *acc, *cpu, *numa;
  g_autofree char *type = NULL, *mode = NULL;
  gboolean file_backed, cells = FALSE;

  g_return_val_if_fail (self != NULL, FALSE);

  root = xmlDocGetRootElement (self->doc);
  if (!(mb = first_child (root, "memoryBacking")))
    return FALSE;
  src = first_child (mb, "source");
  type = src ? get_prop (src, "type") : NULL;
  /* hugepages are hugetlbfs files whatever <source> says, but memfd */
  file_backed = first_child (mb, "hugepages") || g_strcmp0 (type, "memfd") == 0 || g_strcmp0 (type, "file") == 0;
  if (!file_backed || private_cell (root))
    return FALSE;
  acc = first_child (mb, "access");
  mode = acc ? get_prop (acc, "mode") : NULL;
  if (g_strcmp0 (mode, "shared") == 0)
    return TRUE;
  /* else every NUMA cell must say shared itself */
  cpu = first_child (root, "cpu");
  numa = cpu ? first_child (cpu, "numa") : NULL;
  for (xmlNode *c = numa ? numa->children : NULL; c; c = c->next)
    {
      g_autofree char *access = NULL;

      if (!is_element (c, "cell"))
        continue;
      access = get_prop (c, "memAccess");
      if (g_strcmp0 (access, "shared") != 0)
        return FALSE;
      cells = TRUE;
    }
  return cells;
}

static void
record_shared_memory (VaDomain *self)
{
  if (!self->nics_node)
    return; /* no vdpa:nics, so no NIC and nothing changed */
  if (self->shared_memory)
    {
      g_autofree char *words = va_shared_memory_to_string (self->shared_memory);
      g_autofree char *have = get_prop (self->nics_node, VA_SHARED_MEMORY_ATTR);

      if (g_strcmp0 (have, words) != 0)
        xmlSetProp (self->nics_node, XSTR (VA_SHARED_MEMORY_ATTR), XSTR (words));
    }
  else
    unset_prop (self->nics_node, VA_SHARED_MEMORY_ATTR);
}

/* Like insert_child, but into an element that may hold only text (a
 * hand-written <memoryBacking> </memoryBacking>): there the new child goes
 * first, so that removing it takes no text that was there before. */
static void
insert_into (xmlNode *parent, xmlNode *child)
{
  if (!first_element_child (parent) && parent->children)
    xmlAddPrevSibling (parent->children, child);
  else
    insert_child (parent, child);
}

/* <memoryBacking> with shared, file-backed memory: a new element after
 * <memory> and its kin (where libvirt writes it), else the domain's own
 * with a memfd <source> where it has none and no hugepages (an anonymous
 * one made memfd; a file kept), and shared <access> (a private one made
 * shared: libvirt's default, and the relay could not reach it). */
static void
share_memory (VaDomain *self)
{
  xmlNode *root = xmlDocGetRootElement (self->doc);
  xmlNode *mb = first_child (root, "memoryBacking");
  xmlNode *src, *acc;

  if (!mb)
    {
      xmlNode *ref = NULL;
      g_autofree char *indent = NULL;

      for (xmlNode *c = root->children; c; c = c->next)
        if (is_element (c, "memory") || is_element (c, "currentMemory") || is_element (c, "blkiotune") || is_element (c, "memtune"))
          ref = c;
      if (!ref)
        for (xmlNode *c = root->children; c; c = c->next)
          if (c->type == XML_ELEMENT_NODE)
            ref = c;
      if (ref)
        indent = indent_before (ref);
      mb = xmlNewDocNode (self->doc, NULL, XSTR ("memoryBacking"), NULL);
      if (indent)
        {
          g_autofree char *inner = g_strconcat (indent, "  ", NULL);

          xmlAddChild (mb, xmlNewDocText (self->doc, XSTR (inner)));
          xmlAddChild (mb, new_element (self->doc, "source", "type", "memfd"));
          xmlAddChild (mb, xmlNewDocText (self->doc, XSTR (inner)));
          xmlAddChild (mb, new_element (self->doc, "access", "mode", "shared"));
          xmlAddChild (mb, xmlNewDocText (self->doc, XSTR (indent)));
        }
      else
        {
          xmlAddChild (mb, new_element (self->doc, "source", "type", "memfd"));
          xmlAddChild (mb, new_element (self->doc, "access", "mode", "shared"));
        }
      if (ref)
        insert_after (ref, mb);
      else
        xmlAddChild (root, mb);
      self->shared_memory |= VA_SHARED_MEMORY_ELEMENT | VA_SHARED_MEMORY_SOURCE | VA_SHARED_MEMORY_ACCESS;
      record_shared_memory (self);
      return;
    }
  if (!first_child (mb, "hugepages"))
    {
      g_autofree char *type = NULL;

      if (!(src = first_child (mb, "source")))
        {
          insert_into (mb, new_element (self->doc, "source", "type", "memfd"));
          self->shared_memory |= VA_SHARED_MEMORY_SOURCE;
        }
      else if (g_strcmp0 ((type = get_prop (src, "type")), "anonymous") == 0)
        {
          xmlSetProp (src, XSTR ("type"), XSTR ("memfd"));
          self->shared_memory |= VA_SHARED_MEMORY_ANONYMOUS;
        }
    }
  if (!(acc = first_child (mb, "access")))
    {
      insert_into (mb, new_element (self->doc, "access", "mode", "shared"));
      self->shared_memory |= VA_SHARED_MEMORY_ACCESS;
    }
  else
    {
      g_autofree char *mode = get_prop (acc, "mode");

      if (g_strcmp0 (mode, "private") == 0)
        {
          xmlSetProp (acc, XSTR ("mode"), XSTR ("shared"));
          self->shared_memory |= VA_SHARED_MEMORY_PRIVATE;
        }
    }
  record_shared_memory (self);
}

/* Takes back what share_memory() recorded, where it is still as it left
 * it; the domain's own pieces stay. */
static void
unshare_memory (VaDomain *self)
{
  xmlNode *root = xmlDocGetRootElement (self->doc);
  xmlNode *mb = first_child (root, "memoryBacking");
  guint done = self->shared_memory;
  xmlNode *src = mb ? first_child (mb, "source") : NULL;
  xmlNode *acc = mb ? first_child (mb, "access") : NULL;
  g_autofree char *type = src ? get_prop (src, "type") : NULL;
  g_autofree char *mode = acc ? get_prop (acc, "mode") : NULL;

  if (!done)
    return;
  /* a value changed goes back whatever else the element holds; an
   * element added goes only while it is as it was written */
  if ((done & VA_SHARED_MEMORY_ANONYMOUS) && g_strcmp0 (type, "memfd") == 0)
    xmlSetProp (src, XSTR ("type"), XSTR ("anonymous"));
  else if (src && (done & VA_SHARED_MEMORY_SOURCE) && is_ours (src, "type", "memfd"))
    remove_child (src);
  if ((done & VA_SHARED_MEMORY_PRIVATE) && g_strcmp0 (mode, "shared") == 0)
    xmlSetProp (acc, XSTR ("mode"), XSTR ("private"));
  else if (acc && (done & VA_SHARED_MEMORY_ACCESS) && is_ours (acc, "mode", "shared"))
    remove_child (acc);
  if (mb && (done & VA_SHARED_MEMORY_ELEMENT) && !mb->properties && !first_element_child (mb))
    remove_child (mb);
  self->shared_memory = 0;
  record_shared_memory (self);
}

/* @keep: a portable NIC stays portable whatever @form says. */
static gboolean
rewrite (VaDomain *self, const VaHostView *view, VaForm form, gboolean keep, GError **error)
{
  g_autoptr (GArray) plans = g_array_sized_new (FALSE, TRUE, sizeof (VaNicPlan), self->nics->len);
  g_autoptr (GArray) forms = g_array_sized_new (FALSE, TRUE, sizeof (VaForm), self->nics->len);
  g_autoptr (GArray) fallbacks = g_array_sized_new (FALSE, TRUE, sizeof (gboolean), self->nics->len);
  g_autoptr (GHashTable) used = g_hash_table_new (g_str_hash, g_str_equal);
  const VaNic *software = NULL;       /* the first NIC that may get a software device */
  const VaNic *software_accel = NULL; /* the first such NIC in the accelerated form */

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
      if (*want == VA_FORM_ACCELERATED && plan->failover)
        {
          /* the standby needs no slot: the VF comes at run time, if one
           * is free then */
          g_autofree char *machine = NULL;

          if (!machine_takes_failover (self, &machine))
            {
              g_set_error (error, VA_ERROR, VA_ERROR_INVALID_ARGUMENT,
                           "NIC %s: network '%s' asks for failover, whose VF QEMU plugs only on PCI Express, and %s%.*s%s is no q35: "
                           "make the domain q35, or give the NIC mode=\"auto\" for the plain passthrough form",
                           nic->mac, nic->network, machine ? "machine '" : "the domain names no machine (libvirt picks pc)",
                           VA_CUT (machine ? machine : "", 64), machine ? "'" : "");
              return FALSE;
            }
        }
      else if (*want == VA_FORM_ACCELERATED)
        {
          gint64 free_slots = va_host_view_get_pool_free (view, plan->pool);
          guint taken = GPOINTER_TO_UINT (g_hash_table_lookup (used, plan->pool));

          if (free_slots >= 0 && taken >= free_slots)
            {
              if (!plan->bridge)
                {
                  const char *why = va_host_view_get_pool_why_full (view, plan->pool);

                  g_set_error (error, VA_ERROR, VA_ERROR_POOL_EXHAUSTED,
                               "NIC %s: pool '%s' has no free slot%s%s%s and %s allows no fallback", nic->mac, plan->pool, why ? " (" : "",
                               why ? why : "", why ? ")" : "", nic->network ? "its network" : "the NIC");
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
      /* a NIC marked to swap back (after a move) is swapped live, onto
       * the memory the guest started with */
      if ((*want == VA_FORM_ACCELERATED || nic->swap_back) && plan->kind == VA_POOL_KIND_VDPA && plan->software && !software)
        software = nic;
      if (*want == VA_FORM_ACCELERATED && plan->kind == VA_POOL_KIND_VDPA && plan->software && !software_accel)
        software_accel = nic;
    }
  if (software)
    {
      xmlNode *cell = private_cell (xmlDocGetRootElement (self->doc));

      /* a NIC that only waits to swap back makes no form fail: it gets
       * hardware only, live */
      if (cell && !software_accel)
        software = NULL;
      else if (cell)
        {
          g_autofree char *id = get_prop (cell, "id");

          g_set_error (error, VA_ERROR, VA_ERROR_INVALID_ARGUMENT,
                       "NIC %s may get a software vDPA device, whose relay reaches only shared guest memory, and NUMA cell %.*s says "
                       "memAccess='private': make it shared, or put the NIC on a network whose pool has no software-slots",
                       software_accel->mac, VA_CUT (id ? id : "?", 16));
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
      if (keep)
        drop_member (self, nic);
      /* the wish is granted: the next move marks it again if need be */
      if (nic->form == VA_FORM_ACCELERATED && nic->swap_back)
        {
          unset_prop (g_ptr_array_index (self->nic_nodes, i), "swap-back");
          unset_prop (g_ptr_array_index (self->nic_nodes, i), "swap-back-outcome");
          nic->swap_back = FALSE;
          g_clear_pointer (&nic->swap_back_outcome, g_free);
        }
      if (nic->form == VA_FORM_ACCELERATED && plan->failover)
        {
          to_failover (iface, g_ptr_array_index (self->nic_nodes, i), nic, plan);
          continue;
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
      drop_failover (iface, g_ptr_array_index (self->nic_nodes, i), nic);
    }
  /* what an earlier rewrite changed goes back first: the form then
   * depends on the domain's own memory alone, whatever the record says,
   * so that portable and accelerated forms give each other back */
  unshare_memory (self);
  if (software)
    share_memory (self);
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
