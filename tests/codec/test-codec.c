/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The lease and the allocation request to the bus and back: every field
 * and every option at its bounds, and what a decoder must refuse. */
#include <glib.h>
#include <string.h>

#include "va-alloc-request.h"
#include "va-error.h"
#include "va-ids.h"
#include "va-lease.h"

#define UUID "4dea22b3-1d52-d8f3-2516-782e98ab3fa0"
#define MAC "52:54:00:6b:3c:58"

static VaLease *
make_lease (void)
{
  VaLease *l = va_lease_new ();

  l->uuid = g_strdup (UUID);
  l->domain_name = g_strdup ("vm1");
  l->mac = g_strdup (MAC);
  l->network = g_strdup ("vpc2");
  l->pool = g_strdup ("accel");
  l->slot = g_strdup ("0000:b3:00.2");
  l->device = g_strdup ("vdpa-0");
  l->chardev = g_strdup ("/dev/vhost-vdpa-0");
  l->port = g_strdup ("/run/vdpa-allocator/ports/" UUID "/" MAC);
  l->vlan = 2334;
  l->queues = 4;
  l->created = 1700000000;
  return l;
}

static void
set (char **field, char *value)
{
  g_free (*field);
  *field = value;
}

static void
assert_lease_round_trip (const VaLease *lease)
{
  g_autoptr (GVariant) v = g_variant_ref_sink (va_lease_to_variant (lease));
  g_autoptr (GError) error = NULL;
  g_autoptr (VaLease) back = va_lease_from_variant (v, &error);

  g_assert_no_error (error);
  g_assert_nonnull (back);
  g_assert_true (va_lease_equal (lease, back));
}

/* Every field, at its lower and upper bound. */
static void
test_lease_round_trip (void)
{
  g_autoptr (VaLease) l = make_lease ();
  g_autoptr (VaLease) sriov = make_lease ();

  g_assert_true (va_lease_validate (l, NULL));
  assert_lease_round_trip (l);

  /* the lower bounds: empty optional strings, untagged, one queue, epoch */
  set (&l->domain_name, g_strdup (""));
  set (&l->network, g_strdup (""));
  set (&l->device, g_strdup (""));
  set (&l->chardev, g_strdup (""));
  set (&l->port, g_strdup (""));
  set (&l->pool, g_strdup ("p"));
  set (&l->slot, g_strdup ("0"));
  l->vlan = 0;
  l->queues = VA_QUEUES_MIN;
  l->created = 0;
  assert_lease_round_trip (l);

  /* the upper bounds */
  set (&l->domain_name, g_strnfill (VA_DOMAIN_NAME_MAX, 'd'));
  set (&l->network, g_strnfill (VA_NAME_MAX, 'n'));
  set (&l->pool, g_strnfill (VA_NAME_MAX, 'p'));
  set (&l->slot, g_strnfill (VA_SLOT_MAX, '0'));
  set (&l->device, g_strnfill (VA_NAME_MAX, 'v'));
  {
    g_autofree char *tail = g_strnfill (VA_PATH_MAX - 1, 'c');
    set (&l->chardev, g_strconcat ("/", tail, NULL));
    set (&l->port, g_strconcat ("/", tail, NULL));
  }
  l->vlan = VA_VLAN_MAX;
  l->queues = VA_QUEUES_MAX;
  l->created = G_MAXINT64;
  assert_lease_round_trip (l);

  /* any name libvirt accepts, in its display form (issue 25, 7) */
  set (&l->domain_name, g_strdup ("caf\xc3\xa9-vm"));
  assert_lease_round_trip (l);
  set (&l->domain_name, va_domain_name_display ("a\tb"));
  assert_lease_round_trip (l);

  /* kind sriov: nothing of ours on the VF */
  sriov->sriov = TRUE;
  set (&sriov->device, g_strdup (""));
  set (&sriov->chardev, g_strdup (""));
  set (&sriov->port, g_strdup (""));
  sriov->queues = 0;
  assert_lease_round_trip (sriov);

  /* form software: a VDUSE device and our relay, kind vdpa only */
  l->software = TRUE;
  assert_lease_round_trip (l);
  sriov->software = TRUE;
  g_assert_false (va_lease_validate (sriov, NULL));
}

/* A lease from a daemon older than the software form has no "form": it
 * reads as hardware. */
static void
test_lease_without_form (void)
{
  g_autoptr (VaLease) l = make_lease ();
  g_autoptr (GVariant) good = NULL;
  g_autoptr (GVariant) v = NULL;
  g_autoptr (VaLease) back = NULL;
  g_autoptr (GError) error = NULL;
  GVariantDict d;

  l->software = TRUE;
  good = g_variant_ref_sink (va_lease_to_variant (l));
  g_variant_dict_init (&d, good);
  g_assert_true (g_variant_dict_remove (&d, "form"));
  v = g_variant_ref_sink (g_variant_dict_end (&d));
  back = va_lease_from_variant (v, &error);
  g_assert_no_error (error);
  g_assert_false (back->software);
}

/* Past each bound by one: the decoder refuses what the store would. */
static void
test_lease_past_bounds (void)
{
  for (guint i = 0; i < 8; i++)
    {
      g_autoptr (VaLease) l = make_lease ();
      g_autoptr (GVariant) v = NULL;
      g_autoptr (GError) error = NULL;
      g_autoptr (VaLease) back = NULL;

      switch (i)
        {
          case 0:
            set (&l->domain_name, g_strnfill (VA_DOMAIN_NAME_MAX + 1, 'd'));
            break;
          case 1:
            set (&l->pool, g_strnfill (VA_NAME_MAX + 1, 'p'));
            break;
          case 2:
            set (&l->slot, g_strnfill (VA_SLOT_MAX + 1, '0'));
            break;
          case 3:
            l->vlan = VA_VLAN_MAX + 1;
            break;
          case 4:
            l->queues = VA_QUEUES_MAX + 1;
            break;
          case 5:
            l->queues = 0;
            break;
          case 6:
            set (&l->uuid, g_ascii_strup (UUID, -1));
            break;
          case 7:
            set (&l->mac, g_strdup ("01:00:5e:00:00:01"));
            break;
          default:
            g_assert_not_reached ();
        }
      v = g_variant_ref_sink (va_lease_to_variant (l));
      back = va_lease_from_variant (v, &error);
      g_assert_null (back);
      g_assert_error (error, VA_ERROR, VA_ERROR_INVALID_ARGUMENT);
    }
}

/* A missing key, a wrong type and an unknown kind are refused; a key the
 * record does not have is left to the caller (ListLeases adds some). */
static void
test_lease_refused (void)
{
  g_autoptr (VaLease) l = make_lease ();
  g_autoptr (GVariant) good = g_variant_ref_sink (va_lease_to_variant (l));
  struct
  {
    const char *key;
    GVariant *value; /* NULL: removed */
    const char *says;
  } cases[] = {
    { "vlan", g_variant_new_uint32 (10), "lease field vlan must be of type q, not u" },
    { "uuid", NULL, "lease field uuid is missing" },
    { "kind", g_variant_new_string ("tap"), "lease field kind is 'tap', not vdpa or sriov" },
    { "form", g_variant_new_string ("firmware"), "lease field form is 'firmware', not hardware or software" },
    { "created", g_variant_new_int64 (5), "lease field created must be of type t, not x" },
  };

  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      GVariantDict d;
      g_autoptr (GVariant) v = NULL;
      g_autoptr (GError) error = NULL;
      g_autoptr (VaLease) back = NULL;

      g_variant_dict_init (&d, good);
      if (cases[i].value)
        g_variant_dict_insert_value (&d, cases[i].key, cases[i].value);
      else
        g_variant_dict_remove (&d, cases[i].key);
      v = g_variant_ref_sink (g_variant_dict_end (&d));
      back = va_lease_from_variant (v, &error);
      g_assert_null (back);
      g_assert_error (error, VA_ERROR, VA_ERROR_INVALID_ARGUMENT);
      g_assert_cmpstr (error->message, ==, cases[i].says);
    }
  {
    GVariantDict d;
    g_autoptr (GVariant) v = NULL;
    g_autoptr (VaLease) back = NULL;

    g_variant_dict_init (&d, good);
    g_variant_dict_insert (&d, "broken", "b", FALSE);
    v = g_variant_ref_sink (g_variant_dict_end (&d));
    back = va_lease_from_variant (v, NULL);
    g_assert_nonnull (back);
    g_assert_true (va_lease_equal (back, l));
  }
}

static void
assert_request_equal (const VaAllocRequest *a, const VaAllocRequest *b)
{
  g_assert_cmpstr (a->uuid, ==, b->uuid);
  g_assert_cmpstr (a->domain_name, ==, b->domain_name);
  g_assert_cmpstr (a->mac, ==, b->mac);
  g_assert_cmpstr (a->network, ==, b->network);
  g_assert_cmpstr (a->pool, ==, b->pool);
  g_assert_cmpuint (a->vlan, ==, b->vlan);
  g_assert_cmpuint (a->queues, ==, b->queues);
  g_assert_cmpuint (a->mtu, ==, b->mtu);
  g_assert_cmpint (a->numa_node, ==, b->numa_node);
  g_assert_cmpstr (a->port, ==, b->port);
  g_assert_cmpstr (a->vf, ==, b->vf);
  g_assert_cmpuint (a->vf_vlan, ==, b->vf_vlan);
  g_assert_cmpstr (a->form, ==, b->form);
}

static void
assert_request_round_trip (const VaAllocRequest *req)
{
  g_autoptr (GVariant) v = g_variant_ref_sink (va_alloc_request_to_variant (req));
  g_autoptr (GError) error = NULL;
  VaAllocRequest back = VA_ALLOC_REQUEST_INIT;

  g_assert_true (g_variant_is_of_type (v, G_VARIANT_TYPE ("(ssssa{sv})")));
  g_assert_true (va_alloc_request_from_variant (v, &back, &error));
  g_assert_no_error (error);
  /* "" and NULL are one on the bus for the arguments */
  if (!req->domain_name)
    back.domain_name = *back.domain_name ? back.domain_name : NULL;
  if (!req->network)
    back.network = *back.network ? back.network : NULL;
  assert_request_equal (req, &back);
}

/* Every option at its lower and upper bound, and none at all. */
static void
test_request_round_trip (void)
{
  VaAllocRequest none = VA_ALLOC_REQUEST_INIT;
  VaAllocRequest low = {
    .uuid = UUID,
    .domain_name = "",
    .mac = MAC,
    .network = "",
    .pool = "",
    .vlan = VA_VLAN_MIN,
    .queues = VA_QUEUES_MIN,
    .mtu = VA_MTU_MIN,
    .numa_node = 0,
    .port = "",
    .vf = "",
    .vf_vlan = 0,
  };
  VaAllocRequest high = {
    .uuid = UUID,
    .domain_name = "vm1",
    .mac = MAC,
    .network = "vpc2",
    .pool = "accel",
    .vlan = VA_VLAN_MAX,
    .queues = VA_QUEUES_MAX,
    .mtu = VA_MTU_MAX,
    .numa_node = G_MAXINT32,
    .port = "/run/vdpa-allocator/ports/" UUID "/" MAC,
    .vf = "0000:b3:00.2",
    .vf_vlan = G_MAXUINT16,
    .form = "hardware",
  };

  none.uuid = UUID;
  none.mac = MAC;
  assert_request_round_trip (&none);
  assert_request_round_trip (&low);
  assert_request_round_trip (&high);
  {
    /* nothing set sends no option */
    g_autoptr (GVariant) opts = g_variant_ref_sink (va_alloc_request_options_to_variant (&none));
    g_assert_cmpuint (g_variant_n_children (opts), ==, 0);
  }
}

static gboolean
decode_one (const char *key, GVariant *value, VaAllocRequest *req, GError **error)
{
  GVariantBuilder b;
  g_autoptr (GVariant) opts = NULL;

  g_variant_builder_init (&b, G_VARIANT_TYPE_VARDICT);
  g_variant_builder_add (&b, "{sv}", key, value);
  opts = g_variant_ref_sink (g_variant_builder_end (&b));
  return va_alloc_request_options_from_variant (opts, req, error);
}

/* Past each bound by one, an unknown key, a wrong type: each refused in
 * the daemon's words. */
static void
test_request_refused (void)
{
  struct
  {
    const char *key;
    GVariant *value;
    const char *says;
  } cases[] = {
    { "vlan", g_variant_new_uint16 (VA_VLAN_MIN - 1), "option 'vlan' is 0, outside 1..4094" },
    { "vlan", g_variant_new_uint16 (VA_VLAN_MAX + 1), "option 'vlan' is 4095, outside 1..4094" },
    { "queues", g_variant_new_uint16 (VA_QUEUES_MIN - 1), "option 'queues' is 0, outside 1..256" },
    { "queues", g_variant_new_uint16 (VA_QUEUES_MAX + 1), "option 'queues' is 257, outside 1..256" },
    { "mtu", g_variant_new_uint16 (VA_MTU_MIN - 1), "option 'mtu' is 67, outside 68..9216" },
    { "mtu", g_variant_new_uint16 (VA_MTU_MAX + 1), "option 'mtu' is 9217, outside 68..9216" },
    { "colour", g_variant_new_string ("blue"), "unknown option 'colour'" },
    { "vlan", g_variant_new_uint32 (10), "option 'vlan' must be of type q, not u" },
    { "pool", g_variant_new_uint16 (1), "option 'pool' must be of type s, not q" },
    { "numa_node", g_variant_new_uint16 (1), "option 'numa_node' must be of type i, not q" },
  };

  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      VaAllocRequest req = VA_ALLOC_REQUEST_INIT;
      g_autoptr (GError) error = NULL;

      g_assert_false (decode_one (cases[i].key, cases[i].value, &req, &error));
      g_assert_error (error, VA_ERROR, VA_ERROR_INVALID_ARGUMENT);
      g_assert_cmpstr (error->message, ==, cases[i].says);
    }
  {
    /* the arguments themselves must be Allocate's */
    g_autoptr (GVariant) v = g_variant_ref_sink (g_variant_new ("(ss)", UUID, MAC));
    VaAllocRequest req = VA_ALLOC_REQUEST_INIT;
    g_autoptr (GError) error = NULL;

    g_assert_false (va_alloc_request_from_variant (v, &req, &error));
    g_assert_error (error, VA_ERROR, VA_ERROR_INVALID_ARGUMENT);
  }
}

/* One wording for a bad MAC and a bad UUID, wherever they are checked. */
static void
test_id_checks (void)
{
  char mac[VA_MAC_STRING_LEN], uuid[VA_UUID_STRING_LEN];
  g_autoptr (GError) error = NULL;

  g_assert_true (va_mac_check ("52:54:00:6B:3C:58", mac, NULL));
  g_assert_cmpstr (mac, ==, MAC);
  g_assert_false (va_mac_check ("01:00:5e:00:00:01", mac, &error));
  g_assert_cmpstr (error->message, ==, "'01:00:5e:00:00:01' is not a unicast MAC address");
  g_clear_error (&error);
  g_assert_false (va_mac_check (NULL, mac, &error));
  g_assert_cmpstr (error->message, ==, "'' is not a unicast MAC address");
  g_clear_error (&error);
  g_assert_true (va_uuid_check ("4dea22b31d52d8f32516782e98ab3fa0", uuid, NULL));
  g_assert_cmpstr (uuid, ==, UUID);
  g_assert_false (va_uuid_check ("nope", uuid, &error));
  g_assert_cmpstr (error->message, ==, "'nope' is not a domain UUID");
}

/* A domain's name is informational: whatever libvirt accepts is stored,
 * escaped and cut for display, never refused (issue 25, 7). */
static void
test_domain_name_display (void)
{
  static const struct
  {
    const char *in, *out;
  } cases[] = {
    { "vm1", "vm1" },
    { "caf\xc3\xa9-vm", "caf\xc3\xa9-vm" },
    { "$(touch x) vm", "$(touch x) vm" },
    { "a\tb", "a\\tb" },
    { "two\nlines\r", "two\\nlines\\r" },
    { "esc\x1b[31m", "esc\\x1b[31m" },
    { "bad\xff", "bad\\xff" },
    { "rlo\xe2\x80\xae"
      "evil",
      "rlo\\u202Eevil" },
    { "", "" },
  };
  g_autofree char *long_ascii = g_strnfill (300, 'x');
  g_autofree char *fits = g_strnfill (VA_DOMAIN_NAME_MAX, 'x');
  g_autoptr (GString) long_utf8 = g_string_new (NULL);
  g_autofree char *tab_at_end = NULL;
  g_autofree char *null_name = va_domain_name_display (NULL);

  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autofree char *got = va_domain_name_display (cases[i].in);
      g_autofree char *again = va_domain_name_display (got);

      g_assert_cmpstr (got, ==, cases[i].out);
      g_assert_cmpstr (again, ==, got); /* idempotent */
      g_assert_true (va_domain_name_is_display (got));
    }
  g_assert_false (va_domain_name_is_display ("a\tb"));
  g_assert_false (va_domain_name_is_display (long_ascii));
  g_assert_cmpstr (null_name, ==, "");

  /* exactly the bound: as it is; past it: cut, "..." within the bound */
  {
    g_autofree char *got = va_domain_name_display (fits);
    g_autofree char *cut = va_domain_name_display (long_ascii);

    g_assert_cmpstr (got, ==, fits);
    g_assert_cmpuint (strlen (cut), ==, VA_DOMAIN_NAME_MAX);
    g_assert_true (g_str_has_suffix (cut, "x..."));
  }
  /* cut on a whole character, and never inside an escape */
  for (guint i = 0; i < 200; i++)
    g_string_append (long_utf8, "\xc3\xa9");
  {
    g_autofree char *cut = va_domain_name_display (long_utf8->str);

    g_assert_true (g_utf8_validate (cut, -1, NULL));
    g_assert_cmpuint (strlen (cut), <=, VA_DOMAIN_NAME_MAX);
    g_assert_true (g_str_has_suffix (cut, "\xc3\xa9..."));
  }
  tab_at_end = g_strconcat (fits + 1, "\t", NULL); /* 255 bytes and a tab: 257 escaped */
  {
    g_autofree char *cut = va_domain_name_display (tab_at_end);
    g_autofree char *want = g_strconcat (fits + 3, "...", NULL);

    g_assert_cmpstr (cut, ==, want);
  }
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/codec/lease/round-trip", test_lease_round_trip);
  g_test_add_func ("/codec/lease/past-bounds", test_lease_past_bounds);
  g_test_add_func ("/codec/lease/refused", test_lease_refused);
  g_test_add_func ("/codec/lease/without-form", test_lease_without_form);
  g_test_add_func ("/codec/request/round-trip", test_request_round_trip);
  g_test_add_func ("/codec/request/refused", test_request_refused);
  g_test_add_func ("/codec/ids", test_id_checks);
  g_test_add_func ("/codec/domain-name-display", test_domain_name_display);
  return g_test_run ();
}
