/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The pool model and the allocation policy. */
#include <glib.h>
#include <string.h>

#include "va-error.h"
#include "va-pool.h"

#define UUID_A "7b0c4a4e-3f1d-4c59-9d2b-5a4f4f0e1a01"
#define UUID_B "7b0c4a4e-3f1d-4c59-9d2b-5a4f4f0e1a02"

/* Pool "p" with @n_pfs PFs "pfN" (PCI 0000:0N:00.0) on NUMA node
 * @numa[N], each with @n_slots slots "0000:0N:00.S" (S from 1). */
static VaPools *
make_pools (guint n_pfs, const int *numa, guint n_slots)
{
  VaPools *pools = va_pools_new ();
  g_autoptr (GError) error = NULL;

  g_assert_true (va_pools_add_pool (pools, "p", &error));
  g_assert_no_error (error);
  for (guint i = 0; i < n_pfs; i++)
    {
      g_autofree char *pf = g_strdup_printf ("pf%u", i);
      g_autofree char *pci = g_strdup_printf ("0000:%02x:00.0", i);

      g_assert_true (va_pools_add_pf (pools, "p", pf, pci, numa ? numa[i] : -1, &error));
      g_assert_no_error (error);
      for (guint s = 1; s <= n_slots; s++)
        {
          g_autofree char *slot = g_strdup_printf ("0000:%02x:%02x.%u", i, s / 8, s % 8);

          g_assert_true (va_pools_add_slot (pools, "p", pf, slot, &error));
          g_assert_no_error (error);
        }
    }
  return pools;
}

static const VaSlot *
alloc_full (VaPools *pools, const char *uuid, guint nic, const char *network, int numa, gboolean *existed, GError **error)
{
  g_autofree char *mac = g_strdup_printf ("52:54:00:00:%02x:%02x", nic / 256, nic % 256);
  VaPoolRequest req = { .uuid = uuid, .mac = mac, .pool = "p", .network = network, .numa_node = numa };

  return va_pools_allocate (pools, &req, existed, error);
}

/* Allocates and asserts success; returns the slot's PF name. */
static const char *
alloc_pf (VaPools *pools, guint nic, int numa)
{
  g_autoptr (GError) error = NULL;
  gboolean existed = TRUE;
  const VaSlot *slot = alloc_full (pools, UUID_A, nic, "net", numa, &existed, &error);

  g_assert_no_error (error);
  g_assert_nonnull (slot);
  g_assert_false (existed);
  g_assert_cmpint (va_slot_get_state (slot), ==, VA_SLOT_LEASED);
  return va_slot_get_pf (slot);
}

static gboolean
release (VaPools *pools, guint nic, GError **error)
{
  g_autofree char *mac = g_strdup_printf ("52:54:00:00:%02x:%02x", nic / 256, nic % 256);

  return va_pools_release (pools, UUID_A, mac, error);
}

static void
assert_counts (VaPools *pools, guint total, guint free, guint leased, guint lost, guint usable)
{
  VaPoolCounts c;
  g_autoptr (GError) error = NULL;

  g_assert_true (va_pools_get_counts (pools, "p", &c, &error));
  g_assert_no_error (error);
  g_assert_cmpuint (c.total, ==, total);
  g_assert_cmpuint (c.free, ==, free);
  g_assert_cmpuint (c.leased, ==, leased);
  g_assert_cmpuint (c.lost, ==, lost);
  g_assert_cmpuint (c.usable, ==, usable);
}

static void
test_numa_first (void)
{
  const int numa[] = { 0, 1 };
  g_autoptr (VaPools) pools = make_pools (2, numa, 2);

  /* pf1 is on node 1: it is chosen although pf0 is as empty and sorts first. */
  g_assert_cmpstr (alloc_pf (pools, 1, 1), ==, "pf1");
  /* Still node 1, although pf1 is now the more loaded. */
  g_assert_cmpstr (alloc_pf (pools, 2, 1), ==, "pf1");
  /* Node 1 is full: any healthy PF rather than failing. */
  g_assert_cmpstr (alloc_pf (pools, 3, 1), ==, "pf0");
  /* No preference, or a node without PFs: least loaded. */
  g_assert_cmpstr (alloc_pf (pools, 4, 7), ==, "pf0");
  assert_counts (pools, 4, 0, 4, 0, 0);
}

static void
test_numa_slot_reports_node (void)
{
  const int numa[] = { 0, 1 };
  g_autoptr (VaPools) pools = make_pools (2, numa, 1);
  g_autoptr (GError) error = NULL;
  const VaSlot *slot = alloc_full (pools, UUID_A, 1, NULL, 1, NULL, &error);

  g_assert_no_error (error);
  g_assert_cmpint (va_slot_get_numa_node (slot), ==, 1);
  g_assert_cmpstr (va_slot_get_pool (slot), ==, "p");
  g_assert_cmpstr (va_slot_get_pf_pci_address (slot), ==, "0000:01:00.0");
  g_assert_cmpstr (va_slot_get_address (slot), ==, "0000:01:00.1");
  g_assert_cmpstr (va_slot_get_uuid (slot), ==, UUID_A);
  g_assert_cmpstr (va_slot_get_mac (slot), ==, "52:54:00:00:00:01");
  g_assert_null (va_slot_get_network (slot));
}

static void
test_least_loaded (void)
{
  g_autoptr (VaPools) pools = make_pools (3, NULL, 4);

  /* Round robin by load, ties by name. */
  g_assert_cmpstr (alloc_pf (pools, 1, -1), ==, "pf0");
  g_assert_cmpstr (alloc_pf (pools, 2, -1), ==, "pf1");
  g_assert_cmpstr (alloc_pf (pools, 3, -1), ==, "pf2");
  g_assert_cmpstr (alloc_pf (pools, 4, -1), ==, "pf0");
  /* pf1 becomes the least loaded when its lease goes. */
  g_assert_true (release (pools, 2, NULL));
  g_assert_cmpstr (alloc_pf (pools, 5, -1), ==, "pf1");
  g_assert_cmpstr (alloc_pf (pools, 6, -1), ==, "pf1");
  g_assert_cmpstr (alloc_pf (pools, 7, -1), ==, "pf2");
}

static void
test_unhealthy_skipped (void)
{
  const int numa[] = { 0, 1 };
  g_autoptr (VaPools) pools = make_pools (2, numa, 2);
  g_autoptr (GError) error = NULL;
  g_autofree char *reason = NULL;
  gboolean healthy = TRUE;

  g_assert_true (va_pools_get_health (pools, "p", &healthy, NULL, NULL));
  g_assert_true (healthy);
  g_assert_true (va_pools_set_pf_health (pools, "p", "pf0", FALSE, "link down", &error));
  g_assert_no_error (error);
  g_assert_true (va_pools_get_health (pools, "p", &healthy, &reason, NULL));
  g_assert_false (healthy);
  g_assert_cmpstr (reason, ==, "pf0: link down");
  assert_counts (pools, 4, 4, 0, 0, 2);

  /* Not even when its NUMA node is asked for, nor when it is the emptiest. */
  g_assert_cmpstr (alloc_pf (pools, 1, 0), ==, "pf1");
  g_assert_cmpstr (alloc_pf (pools, 2, -1), ==, "pf1");
  g_assert_null (alloc_full (pools, UUID_A, 3, NULL, -1, NULL, &error));
  g_assert_error (error, VA_ERROR, VA_ERROR_POOL_EXHAUSTED);
  g_assert_nonnull (strstr (error->message, "2 free on unhealthy PFs"));
  g_clear_error (&error);

  /* Healthy again: usable again. */
  g_assert_true (va_pools_set_pf_health (pools, "p", "pf0", TRUE, NULL, NULL));
  g_assert_cmpstr (alloc_pf (pools, 3, -1), ==, "pf0");

  g_assert_false (va_pools_set_pf_health (pools, "p", "nope", FALSE, "x", &error));
  g_assert_error (error, VA_ERROR, VA_ERROR_NOT_FOUND);
}

static void
test_drain (void)
{
  g_autoptr (VaPools) pools = make_pools (1, NULL, 4);
  g_autoptr (GError) error = NULL;
  const VaSlot *first = alloc_full (pools, UUID_A, 1, NULL, -1, NULL, NULL);
  const VaSlot *again;
  gboolean existed = FALSE;

  g_assert_nonnull (first);
  g_assert_true (va_pools_set_draining (pools, "p", TRUE, NULL));
  g_assert_true (va_pools_get_draining (pools, "p"));

  g_assert_null (alloc_full (pools, UUID_A, 2, NULL, -1, NULL, &error));
  g_assert_error (error, VA_ERROR, VA_ERROR_BUSY);
  g_assert_nonnull (strstr (error->message, "pool p is draining"));
  g_clear_error (&error);

  /* A retried Allocate of an existing lease still answers. */
  again = alloc_full (pools, UUID_A, 1, NULL, -1, &existed, &error);
  g_assert_no_error (error);
  g_assert_true (again == first);
  g_assert_true (existed);

  /* Release goes on while draining. */
  g_assert_true (release (pools, 1, &error));
  g_assert_no_error (error);
  assert_counts (pools, 4, 4, 0, 0, 4);

  g_assert_true (va_pools_set_draining (pools, "p", FALSE, NULL));
  g_assert_nonnull (alloc_full (pools, UUID_A, 2, NULL, -1, NULL, &error));
  g_assert_no_error (error);

  g_assert_false (va_pools_set_draining (pools, "nope", TRUE, &error));
  g_assert_error (error, VA_ERROR, VA_ERROR_NO_SUCH_POOL);
}

static void
test_quota (void)
{
  g_autoptr (VaPools) pools = make_pools (1, NULL, 8);
  g_autoptr (GError) error = NULL;

  va_pools_set_network_quota (pools, "vpc2", 2);
  g_assert_nonnull (alloc_full (pools, UUID_A, 1, "vpc2", -1, NULL, NULL));
  g_assert_nonnull (alloc_full (pools, UUID_A, 2, "vpc2", -1, NULL, NULL));
  g_assert_cmpuint (va_pools_get_network_leases (pools, "vpc2"), ==, 2);

  g_assert_null (alloc_full (pools, UUID_A, 3, "vpc2", -1, NULL, &error));
  g_assert_error (error, VA_ERROR, VA_ERROR_POOL_EXHAUSTED);
  g_assert_nonnull (strstr (error->message, "network vpc2 has reached its quota of 2"));
  g_clear_error (&error);

  /* Other networks and inline intent are not counted against it. */
  g_assert_nonnull (alloc_full (pools, UUID_A, 4, "vpc3", -1, NULL, NULL));
  g_assert_nonnull (alloc_full (pools, UUID_A, 5, "", -1, NULL, NULL));
  g_assert_nonnull (alloc_full (pools, UUID_A, 6, NULL, -1, NULL, NULL));
  g_assert_cmpuint (va_pools_get_network_leases (pools, "vpc2"), ==, 2);

  /* A release makes room. */
  g_assert_true (release (pools, 1, NULL));
  g_assert_cmpuint (va_pools_get_network_leases (pools, "vpc2"), ==, 1);

  /* Leases that hold no slot (software devices) count against it too. */
  g_assert_true (va_pools_check_quota (pools, "vpc2", 0, "p", NULL));
  g_assert_false (va_pools_check_quota (pools, "vpc2", 1, "p", &error));
  g_assert_error (error, VA_ERROR, VA_ERROR_POOL_EXHAUSTED);
  g_assert_cmpstr (error->message, ==, "network vpc2 has reached its quota of 2 leases in pool p");
  g_clear_error (&error);
  g_assert_true (va_pools_check_quota (pools, NULL, 100, "p", NULL));
  {
    VaPoolRequest req
      = { .uuid = UUID_A, .mac = "52:54:00:00:00:0e", .pool = "p", .network = "vpc2", .network_others = 1, .numa_node = -1 };

    g_assert_null (va_pools_allocate (pools, &req, NULL, &error));
    g_assert_error (error, VA_ERROR, VA_ERROR_POOL_EXHAUSTED);
    g_clear_error (&error);
  }
  g_assert_nonnull (alloc_full (pools, UUID_A, 3, "vpc2", -1, NULL, &error));
  g_assert_no_error (error);

  /* 0 lifts the quota. */
  va_pools_set_network_quota (pools, "vpc2", 0);
  g_assert_nonnull (alloc_full (pools, UUID_A, 7, "vpc2", -1, NULL, &error));
  g_assert_no_error (error);
}

static void
test_exhaustion (void)
{
  g_autoptr (VaPools) pools = make_pools (2, NULL, 2);
  g_autoptr (GError) error = NULL;

  for (guint i = 1; i <= 4; i++)
    alloc_pf (pools, i, -1);
  assert_counts (pools, 4, 0, 4, 0, 0);

  g_assert_null (alloc_full (pools, UUID_A, 5, NULL, -1, NULL, &error));
  g_assert_error (error, VA_ERROR, VA_ERROR_POOL_EXHAUSTED);
  g_assert_true (g_str_has_prefix (error->message, "pool p is exhausted"));
  g_assert_null (strchr (error->message, '\n'));
  /* Nothing changed by the failed attempt. */
  assert_counts (pools, 4, 0, 4, 0, 0);
  g_assert_cmpuint (va_pools_get_n_leases (pools), ==, 4);
}

static void
test_no_such_pool (void)
{
  g_autoptr (VaPools) pools = make_pools (1, NULL, 1);
  g_autoptr (GError) error = NULL;
  VaPoolRequest req = { .uuid = UUID_A, .mac = "52:54:00:00:00:01", .pool = "other", .numa_node = -1 };
  VaPoolCounts c;

  g_assert_null (va_pools_allocate (pools, &req, NULL, &error));
  g_assert_error (error, VA_ERROR, VA_ERROR_NO_SUCH_POOL);
  g_assert_nonnull (strstr (error->message, "other"));
  g_clear_error (&error);
  g_assert_false (va_pools_get_counts (pools, "other", &c, &error));
  g_assert_error (error, VA_ERROR, VA_ERROR_NO_SUCH_POOL);
}

static void
test_idempotent_allocate (void)
{
  g_autoptr (VaPools) pools = make_pools (2, NULL, 2);
  gboolean existed = TRUE;
  const VaSlot *a = alloc_full (pools, UUID_A, 1, "vpc2", -1, &existed, NULL);
  const VaSlot *b;

  g_assert_false (existed);
  /* Another NUMA wish or network does not move an existing lease. */
  b = alloc_full (pools, UUID_A, 1, "other", 3, &existed, NULL);
  g_assert_true (a == b);
  g_assert_true (existed);
  assert_counts (pools, 4, 3, 1, 0, 3);
  g_assert_cmpuint (va_pools_get_network_leases (pools, "vpc2"), ==, 1);
  g_assert_cmpuint (va_pools_get_network_leases (pools, "other"), ==, 0);
  g_assert_true (va_pools_lookup_lease (pools, UUID_A, "52:54:00:00:00:01") == a);
}

static void
test_release_unknown (void)
{
  g_autoptr (VaPools) pools = make_pools (1, NULL, 2);
  g_autoptr (GError) error = NULL;

  g_assert_nonnull (alloc_full (pools, UUID_A, 1, NULL, -1, NULL, NULL));
  g_assert_false (release (pools, 2, &error));
  g_assert_error (error, VA_ERROR, VA_ERROR_NOT_FOUND);
  g_clear_error (&error);
  g_assert_false (va_pools_release (pools, UUID_B, "52:54:00:00:00:01", &error));
  g_assert_error (error, VA_ERROR, VA_ERROR_NOT_FOUND);
  g_clear_error (&error);
  assert_counts (pools, 2, 1, 1, 0, 1);

  /* Releasing twice: the second is unknown. */
  g_assert_true (release (pools, 1, NULL));
  g_assert_false (release (pools, 1, &error));
  g_assert_error (error, VA_ERROR, VA_ERROR_NOT_FOUND);
  assert_counts (pools, 2, 2, 0, 0, 2);
  g_assert_null (va_pools_lookup_lease (pools, UUID_A, "52:54:00:00:00:01"));
}

static void
test_release_domain (void)
{
  g_autoptr (VaPools) pools = make_pools (1, NULL, 8);

  for (guint i = 1; i <= 3; i++)
    g_assert_nonnull (alloc_full (pools, UUID_A, i, "vpc2", -1, NULL, NULL));
  g_assert_nonnull (alloc_full (pools, UUID_B, 1, "vpc2", -1, NULL, NULL));

  g_assert_cmpuint (va_pools_release_domain (pools, UUID_A), ==, 3);
  g_assert_cmpuint (va_pools_release_domain (pools, UUID_A), ==, 0);
  assert_counts (pools, 8, 7, 1, 0, 7);
  g_assert_cmpuint (va_pools_get_network_leases (pools, "vpc2"), ==, 1);
  g_assert_nonnull (va_pools_lookup_lease (pools, UUID_B, "52:54:00:00:00:01"));
}

static void
test_freed_slot_reused_last (void)
{
  g_autoptr (VaPools) pools = make_pools (1, NULL, 3);
  const VaSlot *first = alloc_full (pools, UUID_A, 1, NULL, -1, NULL, NULL);
  const VaSlot *next;

  g_assert_true (release (pools, 1, NULL));
  /* The VF just released is the last candidate, not the next. */
  next = alloc_full (pools, UUID_A, 2, NULL, -1, NULL, NULL);
  g_assert_true (next != first);
}

static void
test_restore (void)
{
  g_autoptr (VaPools) pools = make_pools (2, NULL, 2);
  g_autoptr (GError) error = NULL;
  const VaSlot *slot;

  va_pools_set_draining (pools, "p", TRUE, NULL);
  va_pools_set_pf_health (pools, "p", "pf1", FALSE, "link down", NULL);
  va_pools_set_network_quota (pools, "vpc2", 1);

  /* Stored leases come back where they were, whatever the policy says now. */
  g_assert_true (va_pools_restore (pools, UUID_A, "52:54:00:00:00:01", "vpc2", "0000:01:00.2", &error));
  g_assert_no_error (error);
  g_assert_true (va_pools_restore (pools, UUID_A, "52:54:00:00:00:02", "vpc2", "0000:00:00.1", &error));
  g_assert_no_error (error);
  g_assert_true (va_pools_restore (pools, UUID_A, "52:54:00:00:00:01", "vpc2", "0000:01:00.2", &error));
  g_assert_no_error (error);
  slot = va_pools_lookup_lease (pools, UUID_A, "52:54:00:00:00:01");
  g_assert_cmpstr (va_slot_get_address (slot), ==, "0000:01:00.2");
  g_assert_cmpuint (va_pools_get_network_leases (pools, "vpc2"), ==, 2);

  /* A slot cannot be restored to two keys, nor a key to two slots. */
  g_assert_false (va_pools_restore (pools, UUID_B, "52:54:00:00:00:01", NULL, "0000:01:00.2", &error));
  g_assert_error (error, VA_ERROR, VA_ERROR_BUSY);
  g_clear_error (&error);
  g_assert_false (va_pools_restore (pools, UUID_A, "52:54:00:00:00:01", NULL, "0000:00:00.2", &error));
  g_assert_error (error, VA_ERROR, VA_ERROR_BUSY);
  g_clear_error (&error);
  g_assert_false (va_pools_restore (pools, UUID_B, "52:54:00:00:00:05", NULL, "0000:99:00.1", &error));
  g_assert_error (error, VA_ERROR, VA_ERROR_NOT_FOUND);
  assert_counts (pools, 4, 2, 2, 0, 1);
}

static void
test_lost_slots (void)
{
  g_autoptr (VaPools) pools = make_pools (1, NULL, 2);
  g_autoptr (GError) error = NULL;
  const VaSlot *slot;

  /* A lost free slot is never handed out. */
  g_assert_true (va_pools_set_slot_lost (pools, "0000:00:00.1", TRUE, &error));
  g_assert_no_error (error);
  assert_counts (pools, 2, 1, 0, 1, 1);
  slot = alloc_full (pools, UUID_A, 1, NULL, -1, NULL, NULL);
  g_assert_cmpstr (va_slot_get_address (slot), ==, "0000:00:00.2");
  g_assert_null (alloc_full (pools, UUID_A, 2, NULL, -1, NULL, &error));
  g_assert_error (error, VA_ERROR, VA_ERROR_POOL_EXHAUSTED);
  g_clear_error (&error);

  /* A leased slot that is lost keeps its lease, and is lost once released. */
  g_assert_true (va_pools_set_slot_lost (pools, "0000:00:00.2", TRUE, NULL));
  g_assert_cmpint (va_slot_get_state (slot), ==, VA_SLOT_LEASED);
  g_assert_true (release (pools, 1, NULL));
  g_assert_cmpint (va_slot_get_state (slot), ==, VA_SLOT_LOST);
  assert_counts (pools, 2, 0, 0, 2, 0);

  /* Found again: free again. */
  g_assert_true (va_pools_set_slot_lost (pools, "0000:00:00.1", FALSE, NULL));
  assert_counts (pools, 2, 1, 0, 1, 1);
  g_assert_nonnull (alloc_full (pools, UUID_A, 3, NULL, -1, NULL, &error));
  g_assert_no_error (error);

  g_assert_false (va_pools_set_slot_lost (pools, "0000:99:00.1", TRUE, &error));
  g_assert_error (error, VA_ERROR, VA_ERROR_NOT_FOUND);
}

static void
test_build_duplicates (void)
{
  g_autoptr (VaPools) pools = make_pools (1, NULL, 1);
  g_autoptr (GError) error = NULL;
  g_auto (GStrv) names = NULL;

  g_assert_false (va_pools_add_pool (pools, "p", &error));
  g_assert_error (error, VA_ERROR, VA_ERROR_INVALID_ARGUMENT);
  g_clear_error (&error);
  g_assert_false (va_pools_add_pf (pools, "p", "pf0", "x", 0, &error));
  g_assert_error (error, VA_ERROR, VA_ERROR_INVALID_ARGUMENT);
  g_clear_error (&error);
  /* A PF's PCI address is unique across pools, and so is a slot's. */
  g_assert_true (va_pools_add_pool (pools, "a", NULL));
  g_assert_false (va_pools_add_pf (pools, "a", "pf0", "0000:00:00.0", 0, &error));
  g_assert_error (error, VA_ERROR, VA_ERROR_INVALID_ARGUMENT);
  g_assert_cmpstr (error->message, ==, "PF 0000:00:00.0 is in a pool already");
  g_clear_error (&error);
  g_assert_true (va_pools_add_pf (pools, "a", "pf0", "0000:80:00.0", 0, NULL));
  g_assert_false (va_pools_add_slot (pools, "a", "pf0", "0000:00:00.1", &error));
  g_assert_error (error, VA_ERROR, VA_ERROR_INVALID_ARGUMENT);
  g_clear_error (&error);
  g_assert_false (va_pools_add_slot (pools, "a", "pf9", "0000:00:00.7", &error));
  g_assert_error (error, VA_ERROR, VA_ERROR_NOT_FOUND);

  names = va_pools_list_pools (pools);
  g_assert_cmpuint (g_strv_length (names), ==, 2);
  g_assert_cmpstr (names[0], ==, "a");
  g_assert_cmpstr (names[1], ==, "p");
  g_assert_true (va_pools_has_pool (pools, "a"));
  g_assert_false (va_pools_has_pool (pools, "b"));
}

static void
test_find_pf_by_address (void)
{
  g_autoptr (VaPools) pools = make_pools (2, NULL, 2);
  g_autoptr (GError) error = NULL;
  g_auto (GStrv) slots = NULL;
  g_auto (GStrv) addrs = NULL;
  const char *pool = NULL, *pf = NULL;

  g_assert_true (va_pools_find_pf (pools, "0000:01:00.0", &pool, &pf));
  g_assert_cmpstr (pool, ==, "p");
  g_assert_cmpstr (pf, ==, "pf1");
  g_assert_false (va_pools_find_pf (pools, "0000:09:00.0", NULL, NULL));
  g_assert_false (va_pools_find_pf (pools, "", NULL, NULL));
  /* a PF without slots is found all the same */
  g_assert_true (va_pools_add_pool (pools, "q", NULL));
  g_assert_true (va_pools_add_pf (pools, "q", "bare", "0000:0a:00.0", -1, NULL));
  g_assert_true (va_pools_find_pf (pools, "0000:0a:00.0", &pool, &pf));
  g_assert_cmpstr (pool, ==, "q");
  g_assert_cmpstr (pf, ==, "bare");

  slots = va_pools_list_slots (pools, "p", "pf1", &error);
  g_assert_no_error (error);
  g_assert_cmpuint (g_strv_length (slots), ==, 2);
  g_assert_cmpstr (slots[0], ==, "0000:01:00.1");
  g_assert_cmpstr (slots[1], ==, "0000:01:00.2");
  g_assert_null (va_pools_list_slots (pools, "p", "pf9", &error));
  g_assert_error (error, VA_ERROR, VA_ERROR_NOT_FOUND);

  addrs = va_pools_list_pf_addresses (pools);
  g_assert_cmpuint (g_strv_length (addrs), ==, 3);
  g_assert_cmpstr (addrs[0], ==, "0000:00:00.0");
  g_assert_cmpstr (addrs[2], ==, "0000:0a:00.0");
}

static void
test_empty_pool_unhealthy (void)
{
  g_autoptr (VaPools) pools = va_pools_new ();
  g_autofree char *reason = NULL;
  gboolean healthy = TRUE;

  g_assert_true (va_pools_add_pool (pools, "p", NULL));
  g_assert_true (va_pools_get_health (pools, "p", &healthy, &reason, NULL));
  g_assert_false (healthy);
  g_assert_cmpstr (reason, ==, "no PF matches the pool");
}

static void
test_scale (void)
{
  const int numa[] = { 0, 0, 1, 1, 0, 0, 1, 1 };
  gint64 t0 = g_get_monotonic_time ();
  g_autoptr (VaPools) pools = make_pools (8, numa, 512);
  gint64 t1 = g_get_monotonic_time ();

  assert_counts (pools, 4096, 4096, 0, 0, 4096);
  /* Fill most of it, then churn: counters stay exact throughout. */
  for (guint i = 0; i < 4000; i++)
    g_assert_nonnull (alloc_full (pools, UUID_A, i, NULL, (int) (i % 2), NULL, NULL));
  for (guint round = 0; round < 2000; round++)
    {
      guint nic = round % 4000;

      g_assert_true (release (pools, nic, NULL));
      g_assert_nonnull (alloc_full (pools, UUID_A, nic, NULL, -1, NULL, NULL));
    }
  assert_counts (pools, 4096, 96, 4000, 0, 96);
  g_assert_cmpuint (va_pools_release_domain (pools, UUID_A), ==, 4000);
  assert_counts (pools, 4096, 4096, 0, 0, 4096);
  g_test_message ("4096 slots built in %" G_GINT64_FORMAT " us; 4000 + 2000 pairs in %" G_GINT64_FORMAT " us", t1 - t0,
                  g_get_monotonic_time () - t1);
}

/* A slot the caller names (the VF libvirt chose): taken exactly, or one
 * error; never another slot. */
static void
test_named_slot (void)
{
  g_autoptr (VaPools) pools = make_pools (2, NULL, 2);
  g_autoptr (GError) error = NULL;
  VaPoolRequest req = { .uuid = UUID_A, .mac = "52:54:00:00:00:01", .pool = "p", .numa_node = -1, .slot = "0000:01:00.2" };
  const VaSlot *slot;
  VaPoolCounts c;

  g_assert_true (va_pools_add_pool (pools, "q", &error));
  g_assert_true (va_pools_add_pf (pools, "q", "qf", "0000:09:00.0", -1, &error));
  g_assert_true (va_pools_add_slot (pools, "q", "qf", "0000:09:00.1", &error));
  g_assert_no_error (error);

  /* not the least-loaded PF's first slot: the one named */
  slot = va_pools_allocate (pools, &req, NULL, &error);
  g_assert_no_error (error);
  g_assert_cmpstr (va_slot_get_address (slot), ==, "0000:01:00.2");
  g_assert_true (va_pools_get_counts (pools, "p", &c, NULL));
  g_assert_cmpuint (c.leased, ==, 1);

  req.uuid = UUID_B;
  g_assert_null (va_pools_allocate (pools, &req, NULL, &error));
  g_assert_error (error, VA_ERROR, VA_ERROR_BUSY);
  g_clear_error (&error);
  req.slot = "0000:09:00.1"; /* pool q's */
  g_assert_null (va_pools_allocate (pools, &req, NULL, &error));
  g_assert_error (error, VA_ERROR, VA_ERROR_INVALID_ARGUMENT);
  g_clear_error (&error);
  req.slot = "0000:77:00.1"; /* nobody's */
  g_assert_null (va_pools_allocate (pools, &req, NULL, &error));
  g_assert_error (error, VA_ERROR, VA_ERROR_INVALID_ARGUMENT);
  g_clear_error (&error);
  req.slot = "0000:00:00.1";
  g_assert_true (va_pools_set_pf_health (pools, "p", "pf0", FALSE, "link down", &error));
  g_assert_null (va_pools_allocate (pools, &req, NULL, &error));
  g_assert_error (error, VA_ERROR, VA_ERROR_BUSY);
  g_clear_error (&error);
  g_assert_true (va_pools_set_slot_lost (pools, "0000:01:00.1", TRUE, &error));
  req.slot = "0000:01:00.1";
  g_assert_null (va_pools_allocate (pools, &req, NULL, &error));
  g_assert_error (error, VA_ERROR, VA_ERROR_BUSY);
  g_clear_error (&error);
  g_assert_true (va_pools_set_draining (pools, "p", TRUE, &error));
  req.slot = "0000:01:00.2";
  g_assert_null (va_pools_allocate (pools, &req, NULL, &error));
  g_assert_error (error, VA_ERROR, VA_ERROR_BUSY);
  g_assert_cmpuint (va_pools_get_n_leases (pools), ==, 1);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);

  g_test_add_func ("/pool/policy/numa-node-first", test_numa_first);
  g_test_add_func ("/pool/policy/named-slot", test_named_slot);
  g_test_add_func ("/pool/policy/slot-reports-its-place", test_numa_slot_reports_node);
  g_test_add_func ("/pool/policy/least-loaded-pf", test_least_loaded);
  g_test_add_func ("/pool/policy/unhealthy-pf-skipped", test_unhealthy_skipped);
  g_test_add_func ("/pool/policy/drain-refuses-new-allows-release", test_drain);
  g_test_add_func ("/pool/policy/network-quota", test_quota);
  g_test_add_func ("/pool/policy/exhaustion-names-pool", test_exhaustion);
  g_test_add_func ("/pool/policy/no-such-pool", test_no_such_pool);
  g_test_add_func ("/pool/policy/freed-slot-reused-last", test_freed_slot_reused_last);
  g_test_add_func ("/pool/lease/allocate-idempotent", test_idempotent_allocate);
  g_test_add_func ("/pool/lease/release-unknown", test_release_unknown);
  g_test_add_func ("/pool/lease/release-domain", test_release_domain);
  g_test_add_func ("/pool/lease/restore", test_restore);
  g_test_add_func ("/pool/slots/lost", test_lost_slots);
  g_test_add_func ("/pool/model/duplicates-refused", test_build_duplicates);
  g_test_add_func ("/pool/model/empty-pool-unhealthy", test_empty_pool_unhealthy);
  g_test_add_func ("/pool/model/find-pf-by-address", test_find_pf_by_address);
  g_test_add_func ("/pool/model/scale-4096-slots", test_scale);

  return g_test_run ();
}
