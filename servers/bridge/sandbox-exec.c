/* mcpfleet-sandbox-exec: enter a trial server's mount sandbox, then exec it (runner/environment/sandbox.py).
 *
 *   mcpfleet-sandbox-exec [--hide P | --scratch P | --keep P]... -- COMMAND [ARGS...]
 *
 * What `unshare --mount --pid --fork --mount-proc ...` runs in the new namespaces in place of `python -I -S
 * sandbox.py ...`: a port of sandbox.main and apply(plan, unshare=False), step for step (same mounts, flags and
 * options), without the ~17 ms of Python's start-up and ctypes import in every sandboxed server start. Each hide
 * and scratch is covered by an empty tmpfs with the covered folder's mode (and owner, unless in a user namespace),
 * each keep bound back from an O_PATH fd opened before the covering, the folders between made with their original
 * owner and mode, each hide then made read-only. sandbox.py stays the reference and the fallback.
 *
 * Static (gcc -static): no shell, no libc of the image. Any failure: one line on stderr naming the step, the path
 * and the reason, exit 127, COMMAND not run. A usage error: exit 2.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#define NAME "mcpfleet-sandbox-exec"

struct between {
    char path[4096];
    struct stat st;
};

static int fail(const char *what, const char *path) {
    fprintf(stderr, NAME ": %s %s: %s\n", what, path, strerror(errno));
    return 127;
}

static int usage(const char *why, const char *arg) {
    fprintf(stderr, NAME ": %s%s\nusage: " NAME " [--hide|--scratch|--keep PATH]... -- COMMAND [ARG...]\n", why, arg);
    return 2;
}

static int under(const char *path, const char *root) {
    size_t n = strlen(root);
    while (n > 0 && root[n - 1] == '/') n--;  /* root.rstrip("/") */
    if (strcmp(path, root) == 0) return 1;
    return strncmp(path, root, n) == 0 && path[n] == '/';
}

/* sandbox._in_user_namespace: ids that are a mapped subset of the machine's. */
static int in_user_namespace(void) {
    char buf[4096], *tok[4], *save = NULL;
    int fd = open("/proc/self/uid_map", O_RDONLY | O_CLOEXEC), n = 0;
    if (fd < 0) return 0;
    ssize_t len = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (len < 0) return 0;
    buf[len] = '\0';
    for (char *t = strtok_r(buf, " \t\n\r\v\f", &save); t != NULL; t = strtok_r(NULL, " \t\n\r\v\f", &save)) {
        if (n == 3) return 1;
        tok[n++] = t;
    }
    return !(n == 3 && strcmp(tok[0], "0") == 0 && strcmp(tok[1], "0") == 0 && strcmp(tok[2], "4294967295") == 0);
}

/* sandbox._between: the folders strictly between the covering folder of keep and keep, outermost first, written
 * to out (at most max); their number, or -1 when no covered folder holds keep. */
static int between(const char *keep, char **covered, int ncovered, char out[][4096], int max) {
    const char *root = NULL;
    for (int i = 0; i < ncovered && root == NULL; i++)
        if (under(keep, covered[i])) root = covered[i];
    if (root == NULL) return -1;
    size_t n = strlen(root);
    while (n > 0 && root[n - 1] == '/') n--;
    int count = 0;
    for (const char *p = keep + n + 1; p <= keep + strlen(keep); p++) {
        if (*p != '/') continue;
        if (count == max) return count;
        size_t len = (size_t)(p - keep);
        memcpy(out[count], keep, len);
        out[count++][len] = '\0';
    }
    return count;
}

static const struct stat *like(struct between *made, int nmade, const char *path) {
    for (int i = 0; i < nmade; i++)
        if (strcmp(made[i].path, path) == 0) return &made[i].st;
    return NULL;
}

int main(int argc, char **argv) {
    /* sandbox.main and Plan.from_args: --hide, --scratch, --keep in any order up to --, then the command. */
    char **hide = calloc((size_t)argc, sizeof *hide), **scratch = calloc((size_t)argc, sizeof *scratch);
    char **keep = calloc((size_t)argc, sizeof *keep), **covered = calloc((size_t)argc, sizeof *covered);
    int *fds = calloc((size_t)argc, sizeof *fds), nhide = 0, nscratch = 0, nkeep = 0, i = 1;
    if (!hide || !scratch || !keep || !covered || !fds) return fail("allocate", "the plan");
    for (; i < argc && strcmp(argv[i], "--") != 0; i += 2) {
        if (i + 1 >= argc) return usage("no path after ", argv[i]);
        if (strcmp(argv[i], "--hide") == 0) hide[nhide++] = argv[i + 1];
        else if (strcmp(argv[i], "--scratch") == 0) scratch[nscratch++] = argv[i + 1];
        else if (strcmp(argv[i], "--keep") == 0) keep[nkeep++] = argv[i + 1];
        else return usage("not --hide, --scratch or --keep: ", argv[i]);
    }
    if (i >= argc - 1) return usage("no command after the plan: end the plan with -- COMMAND", "");
    char **command = argv + i + 1;

    /* apply(plan, unshare=False) */
    int owners = !in_user_namespace();
    if (mount("none", "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0) return fail("make / private", "/");
    for (int k = 0; k < nkeep; k++)  /* still reachable once their parents are covered */
        if ((fds[k] = open(keep[k], O_PATH | O_CLOEXEC)) < 0) return fail("open the kept", keep[k]);
    int ncovered = 0;
    for (int h = 0; h < nhide; h++) covered[ncovered++] = hide[h];
    for (int s = 0; s < nscratch; s++) covered[ncovered++] = scratch[s];
    /* Each covering folder, and each folder made inside it on the way to what is kept, gets the owner and mode of
     * the one it stands for: who could not list or enter it still cannot. */
    static char found[2048][4096];
    int nmade = 0, maxmade = 0;
    struct between *made = NULL;
    for (int k = 0; k < nkeep; k++) {
        int n = between(keep[k], covered, ncovered, found, 2048);
        if (n < 0) {
            errno = EINVAL;
            return fail("find the covered folder holding the kept", keep[k]);
        }
        for (int d = 0; d < n; d++) {
            if (like(made, nmade, found[d]) != NULL) continue;
            if (nmade == maxmade) {
                maxmade = maxmade ? 2 * maxmade : 64;
                if ((made = realloc(made, (size_t)maxmade * sizeof *made)) == NULL) return fail("allocate", "the plan");
            }
            memcpy(made[nmade].path, found[d], sizeof found[d]);
            if (stat(found[d], &made[nmade++].st) != 0) return fail("stat", found[d]);
        }
    }
    for (int c = 0; c < ncovered; c++) {
        struct stat st;
        char opts[128];
        if (stat(covered[c], &st) != 0) return fail("stat", covered[c]);
        if (owners)
            snprintf(opts, sizeof opts, "mode=%o,uid=%u,gid=%u", st.st_mode & 07777, st.st_uid, st.st_gid);
        else  /* (the mounting user's) */
            snprintf(opts, sizeof opts, "mode=%o", st.st_mode & 07777);
        if (mount("mcpfleet-hidden", covered[c], "tmpfs", MS_NOSUID | MS_NODEV, opts) != 0)
            return fail("cover", covered[c]);
    }
    for (int k = 0; k < nkeep; k++) {
        struct stat st;
        char fdpath[64];
        int n = between(keep[k], covered, ncovered, found, 2048);
        for (int d = 0; d < n; d++) {
            if (lstat(found[d], &st) == 0) continue;
            const struct stat *was = like(made, nmade, found[d]);
            if (mkdir(found[d], 0777) != 0) return fail("make the folder", found[d]);
            if (owners && chown(found[d], was->st_uid, was->st_gid) != 0) return fail("chown", found[d]);
            if (chmod(found[d], was->st_mode & 07777) != 0) return fail("chmod", found[d]);
        }
        snprintf(fdpath, sizeof fdpath, "/proc/self/fd/%d", fds[k]);
        if (stat(fdpath, &st) == 0 && S_ISDIR(st.st_mode)) {
            if (lstat(keep[k], &st) != 0 && mkdir(keep[k], 0700) != 0) return fail("make the kept folder", keep[k]);
        } else {
            int f = open(keep[k], O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
            if (f < 0) return fail("make the kept file", keep[k]);
            close(f);
        }
        if (mount(fdpath, keep[k], NULL, MS_BIND | MS_REC, NULL) != 0) return fail("keep", keep[k]);
    }
    for (int h = 0; h < nhide; h++)
        if (mount(NULL, hide[h], NULL, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV, NULL) != 0)
            return fail("read-only", hide[h]);
    for (int k = 0; k < nkeep; k++) close(fds[k]);
    execvp(command[0], command);
    return fail("run", command[0]);
}
