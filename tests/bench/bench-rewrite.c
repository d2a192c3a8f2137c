/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* How much the intent engine costs over libxml2 itself.
 *
 * For each document, time va_domain_rewrite_xml () (parse, rewrite,
 * serialize) and, on the same bytes in the same run, the floor: libxml2's
 * own parse and serialize with no rewrite. Prints microseconds per call,
 * the ratio rewrite/floor and the target. Timing never fails the run
 * (machines are noisy); an error from the rewrite does.
 *
 * Each measurement takes about VA_BENCH_SECONDS (default 1) split into
 * ROUNDS rounds; the median round is reported. Rewrite and floor rounds
 * alternate, so drift hits both alike. */
#include <libxml/parser.h>
#include <libxml/tree.h>
#include <libxml/xmlsave.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "va-domain.h"

#define ROUNDS 7
#define TARGET_RATIO 1.5

static const char *const uuid = "6b0f5c8e-2d4a-4f1b-9a3c-7e8d9f0a1b2c";

/* ---- documents ---------------------------------------------------------- */

static void
append_pci_address (GString *s, const char *indent, guint bus, guint slot, guint function, gboolean multifunction)
{
  g_string_append_printf (s, "%s<address type=\"pci\" domain=\"0x0000\" bus=\"0x%02x\" slot=\"0x%02x\" function=\"0x%x\"%s/>\n", indent,
                          bus, slot, function, multifunction ? " multifunction=\"on\"" : "");
}

/* A NIC in the portable form, as virt-install writes it for an OVS bridge
 * or a Linux bridge. */
static void
append_portable_nic (GString *s, guint index, const char *bridge, gboolean ovs, guint vlan, guint bus)
{
  g_string_append (s, "    <interface type=\"bridge\">\n");
  g_string_append_printf (s, "      <mac address=\"52:54:00:%02x:%02x:%02x\"/>\n", 0x10, index / 256, index % 256);
  g_string_append_printf (s, "      <source bridge=\"%s\"/>\n", bridge);
  if (ovs)
    {
      g_string_append_printf (s,
                              "      <virtualport type=\"openvswitch\">\n"
                              "        <parameters interfaceid=\"%08x-8b5c-4eeb-8f00-d84eaa0aaa4f\"/>\n"
                              "      </virtualport>\n",
                              index);
      if (vlan)
        g_string_append_printf (s, "      <vlan>\n        <tag id=\"%u\"/>\n      </vlan>\n", vlan);
    }
  g_string_append (s, "      <model type=\"virtio\"/>\n");
  append_pci_address (s, "      ", bus, 0, 0, FALSE);
  g_string_append (s, "    </interface>\n");
}

static void
append_head (GString *s, const char *name, const char *nics_metadata)
{
  g_string_append_printf (s,
                          "<domain type=\"kvm\">\n"
                          "  <name>%s</name>\n"
                          "  <uuid>%s</uuid>\n"
                          "  <metadata>\n"
                          "    <libosinfo:libosinfo xmlns:libosinfo=\"http://libosinfo.org/xmlns/libvirt/domain/1.0\">\n"
                          "      <libosinfo:os id=\"http://redhat.com/rhel/9.2\"/>\n"
                          "    </libosinfo:libosinfo>\n"
                          "%s"
                          "  </metadata>\n"
                          "  <memory unit=\"KiB\">8388608</memory>\n"
                          "  <currentMemory unit=\"KiB\">8388608</currentMemory>\n"
                          "  <vcpu placement=\"static\">4</vcpu>\n"
                          "  <resource>\n"
                          "    <partition>/machine</partition>\n"
                          "  </resource>\n"
                          "  <os>\n"
                          "    <type arch=\"x86_64\" machine=\"pc-q35-7.2\">hvm</type>\n"
                          "    <boot dev=\"hd\"/>\n"
                          "  </os>\n"
                          "  <features>\n"
                          "    <acpi/>\n"
                          "    <apic/>\n"
                          "    <vmport state=\"off\"/>\n"
                          "  </features>\n"
                          "  <cpu mode=\"host-passthrough\" check=\"none\" migratable=\"on\"/>\n"
                          "  <clock offset=\"utc\">\n"
                          "    <timer name=\"rtc\" tickpolicy=\"catchup\"/>\n"
                          "    <timer name=\"pit\" tickpolicy=\"delay\"/>\n"
                          "    <timer name=\"hpet\" present=\"no\"/>\n"
                          "  </clock>\n"
                          "  <on_poweroff>destroy</on_poweroff>\n"
                          "  <on_reboot>restart</on_reboot>\n"
                          "  <on_crash>destroy</on_crash>\n"
                          "  <pm>\n"
                          "    <suspend-to-mem enabled=\"no\"/>\n"
                          "    <suspend-to-disk enabled=\"no\"/>\n"
                          "  </pm>\n"
                          "  <devices>\n"
                          "    <emulator>/usr/libexec/qemu-kvm</emulator>\n"
                          "    <disk type=\"file\" device=\"disk\">\n"
                          "      <driver name=\"qemu\" type=\"qcow2\" discard=\"unmap\"/>\n"
                          "      <source file=\"/var/lib/libvirt/images/%s.qcow2\"/>\n"
                          "      <target dev=\"vda\" bus=\"virtio\"/>\n",
                          name, uuid, nics_metadata, name);
  append_pci_address (s, "      ", 4, 0, 0, FALSE);
  g_string_append (s, "    </disk>\n"
                      "    <disk type=\"file\" device=\"cdrom\">\n"
                      "      <driver name=\"qemu\" type=\"raw\"/>\n"
                      "      <target dev=\"sda\" bus=\"sata\"/>\n"
                      "      <readonly/>\n"
                      "      <address type=\"drive\" controller=\"0\" bus=\"0\" target=\"0\" unit=\"0\"/>\n"
                      "    </disk>\n"
                      "    <controller type=\"usb\" index=\"0\" model=\"qemu-xhci\" ports=\"15\">\n");
  append_pci_address (s, "      ", 2, 0, 0, FALSE);
  g_string_append (s, "    </controller>\n"
                      "    <controller type=\"pci\" index=\"0\" model=\"pcie-root\"/>\n");
}

static void
append_root_ports (GString *s, guint count)
{
  for (guint i = 1; i <= count; i++)
    {
      g_string_append_printf (s,
                              "    <controller type=\"pci\" index=\"%u\" model=\"pcie-root-port\">\n"
                              "      <model name=\"pcie-root-port\"/>\n"
                              "      <target chassis=\"%u\" port=\"0x%x\"/>\n",
                              i, i, 0x10 + i - 1);
      append_pci_address (s, "      ", 0, 2 + (i - 1) / 8, (i - 1) % 8, (i - 1) % 8 == 0);
      g_string_append (s, "    </controller>\n");
    }
}

static void
append_tail (GString *s)
{
  g_string_append (s, "    <controller type=\"sata\" index=\"0\">\n");
  append_pci_address (s, "      ", 0, 0x1f, 2, FALSE);
  g_string_append (s, "    </controller>\n"
                      "    <controller type=\"virtio-serial\" index=\"0\">\n");
  append_pci_address (s, "      ", 3, 0, 0, FALSE);
  g_string_append (s, "    </controller>\n"
                      "    <serial type=\"pty\">\n"
                      "      <target type=\"isa-serial\" port=\"0\">\n"
                      "        <model name=\"isa-serial\"/>\n"
                      "      </target>\n"
                      "    </serial>\n"
                      "    <console type=\"pty\">\n"
                      "      <target type=\"serial\" port=\"0\"/>\n"
                      "    </console>\n"
                      "    <channel type=\"unix\">\n"
                      "      <target type=\"virtio\" name=\"org.qemu.guest_agent.0\"/>\n"
                      "      <address type=\"virtio-serial\" controller=\"0\" bus=\"0\" port=\"1\"/>\n"
                      "    </channel>\n"
                      "    <channel type=\"spicevmc\">\n"
                      "      <target type=\"virtio\" name=\"com.redhat.spice.0\"/>\n"
                      "      <address type=\"virtio-serial\" controller=\"0\" bus=\"0\" port=\"2\"/>\n"
                      "    </channel>\n"
                      "    <input type=\"tablet\" bus=\"usb\">\n"
                      "      <address type=\"usb\" bus=\"0\" port=\"1\"/>\n"
                      "    </input>\n"
                      "    <input type=\"mouse\" bus=\"ps2\"/>\n"
                      "    <input type=\"keyboard\" bus=\"ps2\"/>\n"
                      "    <graphics type=\"spice\" autoport=\"yes\">\n"
                      "      <listen type=\"address\"/>\n"
                      "      <image compression=\"off\"/>\n"
                      "    </graphics>\n"
                      "    <sound model=\"ich9\">\n");
  append_pci_address (s, "      ", 0, 0x1b, 0, FALSE);
  g_string_append (s, "    </sound>\n"
                      "    <audio id=\"1\" type=\"spice\"/>\n"
                      "    <video>\n"
                      "      <model type=\"virtio\" heads=\"1\" primary=\"yes\"/>\n");
  append_pci_address (s, "      ", 0, 1, 0, FALSE);
  g_string_append (s, "    </video>\n"
                      "    <redirdev bus=\"usb\" type=\"spicevmc\">\n"
                      "      <address type=\"usb\" bus=\"0\" port=\"2\"/>\n"
                      "    </redirdev>\n"
                      "    <redirdev bus=\"usb\" type=\"spicevmc\">\n"
                      "      <address type=\"usb\" bus=\"0\" port=\"3\"/>\n"
                      "    </redirdev>\n"
                      "    <memballoon model=\"virtio\">\n");
  append_pci_address (s, "      ", 5, 0, 0, FALSE);
  g_string_append (s, "    </memballoon>\n"
                      "    <rng model=\"virtio\">\n"
                      "      <backend model=\"random\">/dev/urandom</backend>\n");
  append_pci_address (s, "      ", 6, 0, 0, FALSE);
  g_string_append (s, "    </rng>\n"
                      "  </devices>\n"
                      "</domain>\n");
}

/* About 8 KB, the shape virt-install gives a q35 guest, with one NIC on a
 * vdpa network with an OVS fallback and one virtio NIC on a Linux bridge. */
static char *
make_two_nic_domain (void)
{
  GString *s = g_string_new (NULL);

  append_head (s, "rhel9-vm1",
               "    <vdpa:nics xmlns:vdpa=\"" VA_XML_NS "\">\n"
               "      <vdpa:nic mac=\"52:54:00:10:00:00\" network=\"vpc2\"/>\n"
               "      <vdpa:nic mac=\"52:54:00:10:00:01\" network=\"vpc-std\"/>\n"
               "    </vdpa:nics>\n");
  append_root_ports (s, 14);
  append_portable_nic (s, 0, "br-ovs0", TRUE, 2334, 1);
  append_portable_nic (s, 1, "br_bond0", FALSE, 0, 7);
  append_tail (s);
  return g_string_free (s, FALSE);
}

/* 64 NICs over the network kinds: vdpa with OVS fallback, auto on Linux,
 * auto on OVS, virtio on Linux. */
static char *
make_many_nic_domain (guint n_nics)
{
  static const char *const networks[] = { "vpc2", "mixed", "auto-ovs", "lan" };
  GString *meta = g_string_new ("    <vdpa:nics xmlns:vdpa=\"" VA_XML_NS "\">\n");
  GString *s = g_string_new (NULL);

  for (guint i = 0; i < n_nics; i++)
    g_string_append_printf (meta, "      <vdpa:nic mac=\"52:54:00:%02x:%02x:%02x\" network=\"%s\"/>\n", 0x10, i / 256, i % 256,
                            networks[i % G_N_ELEMENTS (networks)]);
  g_string_append (meta, "    </vdpa:nics>\n");

  append_head (s, "many-nics", meta->str);
  append_root_ports (s, 14);
  for (guint i = 0; i < n_nics; i++)
    {
      switch (i % G_N_ELEMENTS (networks))
        {
          case 0:
            append_portable_nic (s, i, "br-ovs0", TRUE, 2334, 8 + i);
            break;
          case 1:
            append_portable_nic (s, i, "br1", FALSE, 0, 8 + i);
            break;
          case 2:
            append_portable_nic (s, i, "ovsbr2", TRUE, 0, 8 + i);
            break;
          default:
            append_portable_nic (s, i, "br0", FALSE, 0, 8 + i);
            break;
        }
    }
  append_tail (s);
  g_string_free (meta, TRUE);
  return g_string_free (s, FALSE);
}

static void
add_network (VaHostView *view, const char *name, VaMode mode, const char *pool, guint16 vlan, const char *bridge, VaBridgeKind kind)
{
  VaNetwork net = {
    .name = (char *) name,
    .mode = mode,
    .pool = (char *) pool,
    .vlan = vlan,
    .bridge = (char *) bridge,
    .bridge_kind = kind,
  };

  va_host_view_add_network (view, &net);
}

static VaHostView *
make_view (void)
{
  VaHostView *view = va_host_view_new ("/run/vdpa-allocator/ports");

  add_network (view, "vpc2", VA_MODE_VDPA, "pool-b", 2334, "br-ovs0", VA_BRIDGE_OVS);
  add_network (view, "vpc-std", VA_MODE_VIRTIO, NULL, 2200, "br_bond0", VA_BRIDGE_LINUX);
  add_network (view, "lan", VA_MODE_VIRTIO, NULL, 0, "br0", VA_BRIDGE_LINUX);
  add_network (view, "mixed", VA_MODE_AUTO, "pool-a", 42, "br1", VA_BRIDGE_LINUX);
  add_network (view, "auto-ovs", VA_MODE_AUTO, "pool-c", 0, "ovsbr2", VA_BRIDGE_OVS);
  /* unlimited: every vdpa-capable NIC is accelerated */
  va_host_view_add_pool (view, "pool-a", 4, -1);
  va_host_view_add_pool (view, "pool-b", 8, -1);
  va_host_view_add_pool (view, "pool-c", 2, -1);
  return view;
}

/* ---- measuring ---------------------------------------------------------- */

typedef struct
{
  const char *xml;
  gsize len;
  const VaHostView *view;
  VaForm form;
} Job;

static void
do_floor (const Job *job)
{
  xmlDoc *doc = xmlReadMemory (job->xml, (int) job->len, "domain.xml", NULL,
                               XML_PARSE_NONET | XML_PARSE_NOERROR | XML_PARSE_NOWARNING | XML_PARSE_NOXINCNODE);
  xmlBuffer *buf = xmlBufferCreate ();
  xmlSaveCtxt *save = xmlSaveToBuffer (buf, NULL, XML_SAVE_AS_XML | XML_SAVE_NO_DECL);

  if (!doc)
    {
      fprintf (stderr, "bench-rewrite: libxml2 refuses the generated document\n");
      exit (1);
    }
  xmlSaveDoc (save, doc);
  xmlSaveClose (save);
  if (xmlBufferLength (buf) == 0)
    {
      fprintf (stderr, "bench-rewrite: libxml2 serialized nothing\n");
      exit (1);
    }
  xmlBufferFree (buf);
  xmlFreeDoc (doc);
}

static void
do_rewrite (const Job *job)
{
  g_autoptr (GError) error = NULL;
  g_autofree char *out = va_domain_rewrite_xml (job->xml, job->len, job->view, job->form, &error);

  if (!out)
    {
      fprintf (stderr, "bench-rewrite: the rewrite failed: %s\n", error->message);
      exit (1);
    }
}

/* Microseconds per call over one round of about @budget_us. */
static double
time_round (void (*fn) (const Job *), const Job *job, gint64 budget_us)
{
  gint64 start = g_get_monotonic_time ();
  gint64 now;
  guint64 n = 0;

  do
    {
      fn (job);
      n++;
      now = g_get_monotonic_time ();
    }
  while (now - start < budget_us);
  return (double) (now - start) / (double) n;
}

static int
cmp_double (const void *a, const void *b)
{
  double x = *(const double *) a, y = *(const double *) b;
  return (x > y) - (x < y);
}

static void
measure (const char *label, const Job *job, gint64 budget_us)
{
  double rewrite[ROUNDS], floor_us[ROUNDS], r, f;

  /* warm up, and fail early on an error */
  do_rewrite (job);
  do_floor (job);
  for (guint i = 0; i < ROUNDS; i++)
    {
      floor_us[i] = time_round (do_floor, job, budget_us / ROUNDS);
      rewrite[i] = time_round (do_rewrite, job, budget_us / ROUNDS);
    }
  qsort (rewrite, ROUNDS, sizeof (double), cmp_double);
  qsort (floor_us, ROUNDS, sizeof (double), cmp_double);
  r = rewrite[ROUNDS / 2];
  f = floor_us[ROUNDS / 2];
  printf ("%-40s %7" G_GSIZE_FORMAT " %10.1f %10.1f %6.2fx  %s\n", label, job->len, r, f, r / f,
          r / f <= TARGET_RATIO ? "ok" : "OVER TARGET");
  fflush (stdout);
}

int
main (int argc, char **argv)
{
  g_autoptr (VaHostView) view = make_view ();
  g_autofree char *two = make_two_nic_domain ();
  g_autofree char *many = make_many_nic_domain (64);
  g_autofree char *two_accel = NULL;
  g_autofree char *many_accel = NULL;
  g_autoptr (GError) error = NULL;
  const char *seconds_env = g_getenv ("VA_BENCH_SECONDS");
  double seconds = seconds_env ? g_ascii_strtod (seconds_env, NULL) : 1.0;
  gint64 budget_us = (gint64) (MAX (seconds, 0.01) * G_USEC_PER_SEC);

  xmlInitParser ();

  /* the accelerated forms, to time the way back too */
  two_accel = va_domain_rewrite_xml (two, -1, view, VA_FORM_ACCELERATED, &error);
  if (two_accel)
    many_accel = va_domain_rewrite_xml (many, -1, view, VA_FORM_ACCELERATED, &error);
  if (!two_accel || !many_accel)
    {
      fprintf (stderr, "bench-rewrite: the rewrite failed: %s\n", error->message);
      return 1;
    }

  printf ("# va_domain_rewrite_xml () against libxml2 parse + serialize (the floor), median of %d rounds, %.2f s each measurement\n",
          ROUNDS, seconds);
  printf ("%-40s %7s %10s %10s %7s  target <= %.1fx\n", "document", "bytes", "rewrite us", "floor us", "ratio", TARGET_RATIO);
  {
    const Job jobs[] = {
      { two, strlen (two), view, VA_FORM_ACCELERATED },
      { two_accel, strlen (two_accel), view, VA_FORM_PORTABLE },
      { many, strlen (many), view, VA_FORM_ACCELERATED },
      { many_accel, strlen (many_accel), view, VA_FORM_PORTABLE },
    };
    const char *const labels[] = {
      "2-NIC virt-install: portable->accel",
      "2-NIC virt-install: accel->portable",
      "64-NIC: portable->accel",
      "64-NIC: accel->portable",
    };

    for (guint i = 0; i < G_N_ELEMENTS (jobs); i++)
      measure (labels[i], &jobs[i], budget_us);
  }
  return 0;
}
