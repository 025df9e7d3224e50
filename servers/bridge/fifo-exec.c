/* mcpfleet-fifo-exec: run a stdio MCP server with its stdin and stdout on two FIFOs (issue 46 §2).
 *
 *   mcpfleet-fifo-exec IN OUT -- COMMAND [ARGS...]   open IN for reading, then OUT for writing (both block until
 *                                                     the runner opens its ends), make them fds 0 and 1, exec COMMAND
 *   mcpfleet-fifo-exec --install DIR                 copy this binary to DIR/mcpfleet-fifo-exec and make the FIFOs
 *                                                     DIR/in and DIR/out (mode 0600): the pod's bridge init container
 *
 * Static (gcc -static): it needs nothing of the image it runs in, not even a libc or a shell. If COMMAND cannot be
 * run, the reason goes to stderr (the container's log) and, as one line, to OUT, where the runner reads it.
 * SIGTERM while waiting for the runner ends it at once (as PID 1 of a container it would otherwise be ignored).
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void stop(int sig) { _exit(128 + sig); }

static int fail(const char *what, const char *path) {
    fprintf(stderr, "mcpfleet-fifo-exec: %s %s: %s\n", what, path, strerror(errno));
    return 127;
}

static int install(const char *dir) {
    char path[4096], tmp[4100], buf[65536];
    ssize_t n;
    snprintf(path, sizeof path, "%s/mcpfleet-fifo-exec", dir);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    int src = open("/proc/self/exe", O_RDONLY), dst = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0555);
    if (src < 0) return fail("cannot read", "/proc/self/exe");
    if (dst < 0) return fail("cannot write", tmp);
    while ((n = read(src, buf, sizeof buf)) > 0)
        if (write(dst, buf, (size_t)n) != n) return fail("cannot write", tmp);
    if (n < 0 || close(dst) != 0 || rename(tmp, path) != 0) return fail("cannot install", path);
    const char *names[] = {"in", "out"};
    for (int i = 0; i < 2; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        unlink(path);
        if (mkfifo(path, 0600) != 0 || chmod(path, 0600) != 0) return fail("cannot make the FIFO", path);
    }
    return 0;
}

int main(int argc, char **argv) {
    if (argc == 3 && strcmp(argv[1], "--install") == 0) return install(argv[2]);
    if (argc < 5 || strcmp(argv[3], "--") != 0) {
        fprintf(stderr, "usage: mcpfleet-fifo-exec IN OUT -- COMMAND [ARGS...] | --install DIR\n");
        return 2;
    }
    signal(SIGTERM, stop);
    signal(SIGINT, stop);
    int in = open(argv[1], O_RDONLY);
    if (in < 0) return fail("cannot open", argv[1]);
    int out = open(argv[2], O_WRONLY);
    if (out < 0) return fail("cannot open", argv[2]);
    if (dup2(in, 0) < 0 || dup2(out, 1) < 0) return fail("cannot redirect to", argv[2]);
    if (in > 1) close(in);
    if (out > 1) close(out);
    signal(SIGTERM, SIG_DFL);
    signal(SIGINT, SIG_DFL);
    execvp(argv[4], argv + 4);
    int err = errno;
    fprintf(stderr, "mcpfleet-fifo-exec: cannot run '%s': %s\n", argv[4], strerror(err));
    printf("mcpfleet-fifo-exec: cannot run '%s': %s\n", argv[4], strerror(err));
    return err == ENOENT ? 127 : 126;
}
