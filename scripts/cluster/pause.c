/* The pod sandbox's pause process for the test cluster: it holds the pod's namespaces, reaps
 * what is reparented to it, and exits on SIGINT or SIGTERM. Built static (scripts/cluster/up.sh). */
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static void leave(int signal) {
  (void)signal;
  _exit(0);
}

static void reap(int signal) {
  (void)signal;
  while (waitpid(-1, NULL, WNOHANG) > 0) {
  }
}

int main(void) {
  struct sigaction on_exit = {.sa_handler = leave};
  struct sigaction on_child = {.sa_handler = reap, .sa_flags = SA_NOCLDSTOP};
  if (sigaction(SIGINT, &on_exit, NULL) < 0 || sigaction(SIGTERM, &on_exit, NULL) < 0 ||
      sigaction(SIGCHLD, &on_child, NULL) < 0) {
    return 1;
  }
  for (;;) {
    pause();
  }
}
