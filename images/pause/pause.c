/*
 * The pod sandbox's pause process: holds the pod's namespaces and does nothing else. It waits for
 * SIGTERM or SIGINT and exits 0. As PID 1 it also reaps children (shared PID namespace pods).
 * Built with `gcc -static` into a FROM-scratch image (images/pause/Dockerfile), since no registry
 * serves the upstream pause image here.
 */
#include <signal.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

static volatile sig_atomic_t stop = 0;

static void on_stop(int sig) { (void)sig; stop = 1; }

static void on_child(int sig) {
  (void)sig;
  while (waitpid(-1, NULL, WNOHANG) > 0) {}
}

int main(int argc, char **argv) {
  if (argc > 1 && argv[1][0] == '-' && argv[1][1] == 'v') {
    puts("rt-pause 1");
    return 0;
  }
  struct sigaction term = {0}, child = {0};
  term.sa_handler = on_stop;
  sigaction(SIGTERM, &term, NULL);
  sigaction(SIGINT, &term, NULL);
  child.sa_handler = on_child;
  child.sa_flags = SA_NOCLDSTOP | SA_RESTART;
  sigaction(SIGCHLD, &child, NULL);
  while (!stop) pause();
  return 0;
}
