/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* A stand-in for vdpa-allocator-libvirt-swap in test-swapback: built
 * beside the test under the helper's name, where va_path_libexec looks
 * first. --uri MODE:FILE says what it does; FILE gets "start PID", then
 * "TERM" when SIGTERM arrives, then "exit" when it exits by itself.
 * MODE sleep: ignores --wait and sleeps; SIGTERM ends it (a helper between
 * two NICs). MODE ignore-term: SIGTERM changes nothing (a helper stuck in
 * a libvirt call); only SIGKILL ends it. With --pending it lists
 * PENDING_N domains whose swap back is to be resumed and exits. */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define PENDING_N 10

static int log_fd = -1;
static volatile sig_atomic_t ignore_term;

static void
say (const char *what)
{
  if (write (log_fd, what, strlen (what)) < 0)
    _exit (2);
}

static void
on_term (int sig)
{
  (void) sig;
  say ("TERM\n");
  if (!ignore_term)
    {
      say ("exit\n");
      /* what a helper stopped between two NICs prints */
      if (write (STDOUT_FILENO, "52:54:00:6b:3c:58 accelerated\n", 30) < 0)
        _exit (2);
      _exit (1);
    }
}

int
main (int argc, char **argv)
{
  const char *uri = NULL;
  char *file, line[64];
  struct sigaction sa = { .sa_handler = on_term };

  for (int i = 1; i < argc; i++)
    if (strcmp (argv[i], "--pending") == 0)
      {
        for (int d = 0; d < PENDING_N; d++)
          printf ("4dea22b3-1d52-d8f3-2516-7820000000%02d dom%d\n", d, d);
        return 0;
      }
  for (int i = 1; i + 1 < argc; i++)
    if (strcmp (argv[i], "--uri") == 0)
      uri = argv[i + 1];
  if (!uri || !(file = strchr (uri, ':')))
    {
      fprintf (stderr, "swap-stub: --uri MODE:FILE\n");
      return 2;
    }
  log_fd = open (file + 1, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  if (log_fd < 0)
    return 2;
  ignore_term = strncmp (uri, "ignore-term:", 12) == 0;
  sigemptyset (&sa.sa_mask);
  sigaction (SIGTERM, &sa, NULL);
  snprintf (line, sizeof line, "start %d\n", (int) getpid ());
  say (line);
  for (;;)
    pause ();
}
