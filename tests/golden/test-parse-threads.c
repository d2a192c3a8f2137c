/* The first documents a process parses may come from several threads at once
 * (the daemon's rewriter workers). libxml2 2.9 sets up its globals lazily
 * and unlocked, so that race leaked a mutex under ASan in CI. Each child
 * here parses first from many threads at once; the sanitizers setup fails
 * a child whose exit finds a leak. */

#include "config.h"

#include "va-domain.h"

#define THREADS 16
#define ROUNDS 24

static const char domain_xml[] = "<domain type='kvm'><name>race</name><devices>"
                                 "<interface type='network'><mac address='52:54:00:00:00:01'/>"
                                 "<source network='default'/><model type='virtio'/></interface>"
                                 "</devices></domain>";

static GMutex gate_lock;
static GCond gate_cond;
static gboolean gate_open;

static gpointer
parse_at_the_gate (gpointer data)
{
  g_autoptr (VaDomain) domain = NULL;
  g_autoptr (GError) error = NULL;

  g_mutex_lock (&gate_lock);
  while (!gate_open)
    g_cond_wait (&gate_cond, &gate_lock);
  g_mutex_unlock (&gate_lock);

  domain = va_domain_parse (domain_xml, -1, &error);
  g_assert_no_error (error);
  return NULL;
}

static void
test_first_parse_from_many_threads (void)
{
  for (int round = 0; round < ROUNDS; round++)
    {
      if (g_test_subprocess ())
        {
          GThread *threads[THREADS];

          for (int i = 0; i < THREADS; i++)
            threads[i] = g_thread_new ("parse", parse_at_the_gate, NULL);
          g_mutex_lock (&gate_lock);
          gate_open = TRUE;
          g_cond_broadcast (&gate_cond);
          g_mutex_unlock (&gate_lock);
          for (int i = 0; i < THREADS; i++)
            g_thread_join (threads[i]);
          return;
        }
      g_test_trap_subprocess (NULL, 0, G_TEST_SUBPROCESS_DEFAULT);
      g_test_trap_assert_passed ();
    }
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/xml/first-parse-from-many-threads", test_first_parse_from_many_threads);
  return g_test_run ();
}
