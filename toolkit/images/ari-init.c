/*
 * ari-init: PID 1 of every ARI Bench container, and the wrapper of every command run in one.
 *
 * Why a program of our own: `docker exec` has no way to kill what it started, and a process
 * that forks, calls setsid() and lets its parent exit leaves the tree of the command it came
 * from. Three rules, kept by this file, give each command the guarantee the local backend's
 * PID namespaces give: its whole tree dies with it, and it can be killed from outside.
 *
 *   ari-init init
 *       PID 1 (root, only CAP_KILL, CAP_SETUID and CAP_SETGID). Processes inside the container
 *       cannot signal it (the kernel ignores signals to a namespace's init that it has no
 *       handler for) and, running as another uid, cannot trace it. Every 50 ms it reaps
 *       zombies and kills every process whose parent is itself: nothing legitimate is ever its
 *       child (commands come in through `docker exec`, whose processes have no parent inside
 *       the container), so such a process escaped a command that died. It reads requests from
 *       its stdin, which only the harness can write (through the engine): "kill ID" kills the
 *       tree of the command with that id. Its stdin closing means the harness is gone: it
 *       exits, and the container dies with it. It makes the status FIFO (STATUS_FIFO, in a
 *       root-only tmpfs folder) and copies every line a wrapper writes there to its stdout,
 *       which only the harness reads (attached through the engine).
 *
 *   ari-init run ID UID GID CWD [--] ARGV...
 *       The wrapper `docker exec` starts for each command, as root: the sandbox's processes
 *       (another uid) can neither signal, trace nor read it. It is a child subreaper, so
 *       orphans of the command stay its descendants; it runs ARGV as UID:GID (no supplementary
 *       groups, so no capability either) in CWD, in a session of its own, waits for it, then
 *       kills everything ARGV left behind, and writes "status ID exit N" or "status ID signal
 *       N" to the status FIFO, which the sandbox user cannot open: the engine reports only
 *       128+N for a signal, which cannot be told from exit(128+N). Its own exit code is the
 *       command's (128+N for a signal), which the engine keeps as the exec's.
 *
 * Standard C and Linux system calls only; built static so it runs in any image.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <grp.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_PROCS 65536
#define STATUS_DIR "/run/ari-init"   /* a tmpfs of its own, mode 0700, root's (the harness) */
#define STATUS_FIFO STATUS_DIR "/status"

struct proc {
    pid_t pid;
    pid_t ppid;
    char state;
};

static struct proc procs[MAX_PROCS];

/* Whether a process /proc shows as a zombie has other threads still running: its main thread
   called pthread_exit, it lives on (and may fork). Such a "zombie leader" is alive: a kill that
   skipped it let it outlive its call (and a PID 1 that skipped it left it as an orphan). */
static int threads_alive(long pid) {
    char path[64];
    snprintf(path, sizeof path, "/proc/%ld/task", pid);
    DIR *dir = opendir(path);
    if (!dir) return 0;
    int threads = 0;
    struct dirent *entry;
    while ((entry = readdir(dir)))
        if (entry->d_name[0] != '.') threads++;
    closedir(dir);
    return threads > 1;
}

/* Every process of this PID namespace: pid, parent, state ('Z' only when truly dead).
   Returns the count. */
static int scan(void) {
    DIR *dir = opendir("/proc");
    if (!dir) return 0;
    int n = 0;
    struct dirent *entry;
    while ((entry = readdir(dir)) && n < MAX_PROCS) {
        char *end;
        long pid = strtol(entry->d_name, &end, 10);
        if (*end || pid <= 0) continue;
        char path[64], buf[512];
        snprintf(path, sizeof path, "/proc/%ld/stat", pid);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0) continue;
        ssize_t len = read(fd, buf, sizeof buf - 1);
        close(fd);
        if (len <= 0) continue;
        buf[len] = 0;
        char *paren = strrchr(buf, ')'); /* the command name may hold spaces and parens */
        if (!paren) continue;
        char state;
        int ppid;
        if (sscanf(paren + 1, " %c %d", &state, &ppid) != 2) continue;
        if (state == 'Z' && threads_alive(pid)) state = 'S';
        procs[n].pid = (pid_t)pid;
        procs[n].ppid = (pid_t)ppid;
        procs[n].state = state;
        n++;
    }
    closedir(dir);
    return n;
}

/* pid -> index in `procs`, open addressing (the table is twice the largest count). */
#define SLOTS (2 * MAX_PROCS)
static int slot_of[SLOTS];
static unsigned char marked[MAX_PROCS];

static void index_procs(int n) {
    memset(slot_of, -1, sizeof slot_of);
    for (int i = 0; i < n; i++) {
        unsigned h = (unsigned)procs[i].pid % SLOTS;
        while (slot_of[h] >= 0) h = (h + 1) % SLOTS;
        slot_of[h] = i;
    }
}

static int find_proc(pid_t pid) {
    unsigned h = (unsigned)pid % SLOTS;
    while (slot_of[h] >= 0) {
        if (procs[slot_of[h]].pid == pid) return slot_of[h];
        h = (h + 1) % SLOTS;
    }
    return -1;
}

/* Mark the descendants of `top` among the `n` scanned processes (parents before children is
   not guaranteed, so repeat until nothing changes). */
static void mark_descendants(int n, pid_t top) {
    memset(marked, 0, (size_t)n);
    for (int changed = 1; changed;) {
        changed = 0;
        for (int i = 0; i < n; i++) {
            if (marked[i]) continue;
            int parent = find_proc(procs[i].ppid);
            if (procs[i].ppid == top || (parent >= 0 && marked[parent])) {
                marked[i] = 1;
                changed = 1;
            }
        }
    }
}

static void reap(void) {
    while (waitpid(-1, NULL, WNOHANG) > 0) {}
}

static void pause_ms(int ms) {
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* Kill every live descendant of `top` (and `top` itself if `include_top`), until none is left:
   a tree that forks while it is being killed is scanned again. Stopped first, so that a parent
   cannot replace a child between the scan and the kill. */
static void kill_tree(pid_t top, int include_top) {
    for (int round = 0; round < 1000; round++) {
        int n = scan(), found = 0;
        index_procs(n);
        mark_descendants(n, top);
        for (int i = 0; i < n; i++) {
            if (include_top && procs[i].pid == top) marked[i] = 1;
            if (procs[i].state == 'Z' || procs[i].pid == getpid()) marked[i] = 0;
            if (marked[i]) {
                kill(procs[i].pid, SIGSTOP);
                found = 1;
            }
        }
        for (int i = 0; i < n; i++)
            if (marked[i]) kill(procs[i].pid, SIGKILL);
        reap();
        if (!found) return;
        if (round > 2) pause_ms(1);
    }
}

/* The wrapper process of command `id`: started by `docker exec` (no parent inside), with
   argv "ari-init run ID ...". Processes inside cannot fake the parent. */
static pid_t find_command(const char *id) {
    int n = scan();
    for (int i = 0; i < n; i++) {
        if (procs[i].ppid != 0 || procs[i].pid == 1) continue;
        char path[64], buf[4096];
        snprintf(path, sizeof path, "/proc/%d/cmdline", procs[i].pid);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0) continue;
        ssize_t len = read(fd, buf, sizeof buf - 1);
        close(fd);
        if (len <= 0) continue;
        buf[len] = 0;
        char *arg1 = buf + strlen(buf) + 1;
        if (arg1 >= buf + len || strcmp(arg1, "run") != 0) continue;
        char *arg2 = arg1 + strlen(arg1) + 1;
        if (arg2 < buf + len && strcmp(arg2, id) == 0) return procs[i].pid;
    }
    return -1;
}

/* Copy the complete lines of the status FIFO to stdout (the harness's attach stream). */
static void relay_statuses(int fifo, char *buf, size_t *used, size_t size) {
    for (;;) {
        ssize_t got = read(fifo, buf + *used, size - 1 - *used);
        if (got <= 0) return;
        *used += (size_t)got;
        char *start = buf, *newline;
        while ((newline = memchr(start, '\n', (size_t)(buf + *used - start)))) {
            size_t len = (size_t)(newline + 1 - start);
            if (strncmp(start, "status ", 7) == 0) {
                for (size_t done = 0; done < len;) {
                    ssize_t put = write(1, start + done, len - done);
                    if (put < 0 && errno != EINTR) break;
                    if (put > 0) done += (size_t)put;
                }
            }
            start = newline + 1;
        }
        size_t rest = (size_t)(buf + *used - start);
        memmove(buf, start, rest);
        *used = rest;
        if (*used >= size - 1) *used = 0; /* no line that long is ours: drop it */
    }
}

static int init_main(void) {
    sigset_t all;
    sigfillset(&all);
    sigprocmask(SIG_BLOCK, &all, NULL); /* docker stop's SIGTERM changes nothing: kill does */
    signal(SIGPIPE, SIG_IGN);
    /* The status FIFO: only root may reach it (its folder is root's, mode 0700). Held open
       for reading and writing, so it never reports an end. */
    int fifo = -1;
    if (chmod(STATUS_DIR, 0700) == 0 && (mkfifo(STATUS_FIFO, 0600) == 0 || errno == EEXIST))
        fifo = open(STATUS_FIFO, O_RDWR | O_NONBLOCK | O_CLOEXEC);
    if (fifo < 0) perror("ari-init: status fifo");
    char statuses[4096];
    size_t status_used = 0;
    char line[256];
    size_t used = 0;
    for (;;) {
        struct pollfd in[2] = {{0, POLLIN, 0}, {fifo, POLLIN, 0}};
        int ready = poll(in, fifo >= 0 ? 2 : 1, 50);
        if (ready > 0 && fifo >= 0 && in[1].revents & POLLIN)
            relay_statuses(fifo, statuses, &status_used, sizeof statuses);
        if (ready > 0 && in[0].revents) {
            ssize_t got = read(0, line + used, sizeof line - 1 - used);
            if (got <= 0) return 0; /* the harness is gone: the container goes with it */
            used += (size_t)got;
            line[used] = 0;
            char *newline;
            while ((newline = strchr(line, '\n'))) {
                *newline = 0;
                if (strncmp(line, "kill ", 5) == 0) {
                    /* The command's tree, not its wrapper: the wrapper then reports the
                       command's end (killed by SIGKILL) as it reports any other. */
                    pid_t pid = find_command(line + 5);
                    if (pid > 0) kill_tree(pid, 0);
                }
                size_t rest = used - (size_t)(newline + 1 - line);
                memmove(line, newline + 1, rest + 1);
                used = rest;
            }
            if (used >= sizeof line - 1) used = 0; /* garbage: drop it */
        }
        reap();
        int n = scan();
        for (int i = 0; i < n; i++)
            if (procs[i].ppid == 1 && procs[i].state != 'Z') kill_tree(procs[i].pid, 1);
    }
}

/* Write all of `text` to the status FIFO (one write: a line this short is atomic). */
static void report(const char *text) {
    int fd = open(STATUS_FIFO, O_WRONLY | O_CLOEXEC);
    if (fd < 0) {
        perror("ari-init: status fifo");
        return;
    }
    while (write(fd, text, strlen(text)) < 0 && errno == EINTR) {}
    close(fd);
}

static int run_main(int argc, char **argv) {
    /* argv: ari-init run ID UID GID CWD [--] CMD... */
    if (argc < 8) {
        fprintf(stderr, "usage: ari-init run ID UID GID CWD [--] CMD...\n");
        return 125;
    }
    const char *id = argv[2];
    char *end_uid, *end_gid;
    long uid = strtol(argv[3], &end_uid, 10), gid = strtol(argv[4], &end_gid, 10);
    const char *cwd = argv[5];
    int first = 6;
    if (strcmp(argv[first], "--") == 0) first++;
    if (first >= argc || *end_uid || *end_gid || uid <= 0 || gid <= 0 || strlen(id) > 64) {
        fprintf(stderr, "ari-init run: bad arguments\n");
        return 125;
    }
    prctl(PR_SET_CHILD_SUBREAPER, 1);
    unsetenv("HOSTNAME"); /* the engine adds it; the sandbox's environment is ours to say */
    pid_t child = fork();
    if (child < 0) {
        perror("ari-sandbox: fork");
        return 125;
    }
    if (child == 0) {
        /* Root to the sandbox user: every capability goes with the uid change. */
        if (setgroups(0, NULL) != 0 || setgid((gid_t)gid) != 0 || setuid((uid_t)uid) != 0) {
            perror("ari-sandbox: cannot become the sandbox user");
            _exit(126);
        }
        if (chdir(cwd) != 0) {
            fprintf(stderr, "ari-sandbox: cd %s: %s\n", cwd, strerror(errno));
            _exit(126);
        }
        setsid();
        execvp(argv[first], argv + first);
        int err = errno;
        if (err == ENOENT)
            fprintf(stderr, "ari-sandbox: %s: command not found\n", argv[first]);
        else
            fprintf(stderr, "ari-sandbox: %s: %s\n", argv[first], strerror(err));
        _exit(err == ENOENT ? 127 : 126);
    }
    signal(SIGPIPE, SIG_IGN);
    int status = 0;
    for (;;) {
        pid_t got = waitpid(-1, &status, 0);
        if (got == child) break;
        if (got < 0 && errno != EINTR) break;
    }
    kill_tree(getpid(), 0); /* whatever the command left behind */
    char text[128];
    int code;
    if (WIFSIGNALED(status)) {
        snprintf(text, sizeof text, "status %s signal %d\n", id, WTERMSIG(status));
        code = 128 + WTERMSIG(status);
    } else {
        snprintf(text, sizeof text, "status %s exit %d\n", id, WEXITSTATUS(status));
        code = WEXITSTATUS(status);
    }
    report(text);
    return code;
}

int main(int argc, char **argv) {
    if (argc >= 2 && strcmp(argv[1], "init") == 0) return init_main();
    if (argc >= 2 && strcmp(argv[1], "run") == 0) return run_main(argc, argv);
    fprintf(stderr, "usage: ari-init init | ari-init run ID UID GID CWD [--] CMD...\n");
    return 125;
}
