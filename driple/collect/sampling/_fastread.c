/* Optional native reads and sampling loop for the 100 Hz sampler (driple.collect.sampling._fastread).
 *
 * Why: a sampler that sleeps 10 ms between samples wakes up with cold caches, and then every
 * Python bytecode and every Python-level system call costs far more than it does warm; a
 * Python process that only wakes at 100 Hz already costs ~1 % of a core here, a C one ~0.5 %.
 * So the common sample is taken here, exactly as the Python code takes it:
 *   read_trees  = proctree.ProcessTree.sample over all trees (TreeGroup.read),
 *   tcp_batch   = tcpinfo.TcpInfoReader._fold_python (one batch of exact inet_diag lookups),
 *   run_samples = the loop of sampler.Sampler.run (grid, late samples, re-reads), which hands
 *                 back to Python whenever anything else is due or anything is unusual.
 * The Python versions stay the reference, and the fallback when this module is not built.
 * Linux only. No allocation per sample.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h> /* first: its pyconfig.h defines _GNU_SOURCE (recvmmsg, ppoll) */

#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define ABI 3 /* bumped when a signature or a semantic changes; checked by native.py */

/* netlink / inet_diag constants, as in tcpinfo.py */
#define SOCK_DIAG_BY_FAMILY 20
#define NLMSG_ERROR_ 2
#define INET_DIAG_INFO_ 2
#define NLMSG_HDR_LEN 16
#define DIAG_MSG_LEN 72
#define TCPI_BYTES_OFFSET 120 /* u64 tcpi_bytes_acked, then u64 tcpi_bytes_received */
#define INFO_RTA_MIN (4 + TCPI_BYTES_OFFSET + 16)

#define SLOT 8192 /* one netlink answer per slot: ~0.5 kB each, never near 8 kB */
#define SLOTS 8   /* answers per recvmmsg */
#define MAX_TARGETS 256
#define ROW 6 /* t_ns, cpu_ns, rss_bytes, tx_bytes, rx_bytes, n_procs: sampler._Track.ROW */

static unsigned char slots[SLOTS][SLOT];

/* -- argument helpers --------------------------------------------------------------------- */

static int get_buffers(PyObject *const *args, Py_buffer *views, const char *mode, int n) {
    for (int i = 0; i < n; i++) {
        int flags = PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | (mode[i] == 'w' ? PyBUF_WRITABLE : 0);
        if (PyObject_GetBuffer(args[i], &views[i], flags) < 0) {
            while (--i >= 0) PyBuffer_Release(&views[i]);
            return -1;
        }
        if (views[i].itemsize != 8) {
            PyErr_SetString(PyExc_TypeError, "expected array('q') arguments");
            for (; i >= 0; i--) PyBuffer_Release(&views[i]);
            return -1;
        }
    }
    return 0;
}

static void release(Py_buffer *views, int n) {
    for (int i = 0; i < n; i++) PyBuffer_Release(&views[i]);
}

static inline long long mono_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* -- process trees ------------------------------------------------------------------------ */

/* A decimal counter file ("12345\n"); -1 if unreadable or not a number. */
static long long read_number(int fd, int field) {
    char buf[64];
    ssize_t got = pread(fd, buf, sizeof buf, 0);
    if (got <= 0) return -1;
    ssize_t j = 0;
    for (int f = 0; f < field; f++) { /* skip whitespace-separated fields */
        while (j < got && buf[j] == ' ') j++;
        while (j < got && buf[j] != ' ' && buf[j] != '\n') j++;
    }
    while (j < got && buf[j] == ' ') j++;
    ssize_t start = j;
    long long x = 0;
    while (j < got && buf[j] >= '0' && buf[j] <= '9') x = x * 10 + (buf[j++] - '0');
    if (j == start || (j < got && buf[j] != ' ' && buf[j] != '\n')) return -1;
    return x;
}

typedef struct {
    Py_ssize_t n, n_trees;
    const int64_t *clocks, *fds, *owner, *roots, *gone;
    int64_t *last, *cpu, *rss, *root_pages;
    long long page_size;
} Trees;

/* Members' CPU clocks (into last[]) and statm resident pages, summed per tree. 0 as soon as a
 * clock cannot be read (a member exited), else 1. */
static int trees_read(const Trees *t) {
    for (Py_ssize_t k = 0; k < t->n_trees; k++) {
        t->cpu[k] = t->gone[k];
        t->rss[k] = 0;
        t->root_pages[k] = -1;
    }
    for (Py_ssize_t i = 0; i < t->n; i++) {
        int64_t k = t->owner[i];
        struct timespec ts;
        if (k < 0 || k >= t->n_trees || clock_gettime((clockid_t)t->clocks[i], &ts) != 0) return 0;
        long long c = (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
        t->last[i] = c;
        t->cpu[k] += c;
        if (t->fds[i] < 0) continue;
        long long pages = read_number((int)t->fds[i], 1); /* "size resident shared ..." */
        if (pages < 0) pages = 0; /* as int(data.split(None, 2)[1]) failing in Python */
        t->rss[k] += pages * t->page_size;
        if (t->roots[k] == i) t->root_pages[k] = pages;
    }
    return 1;
}

/* args: clocks, fds, cpu_last, owner, roots, gone, page_size, cpu, rss, root_pages */
static int trees_from_args(PyObject *const *args, Py_buffer *v, Trees *t) {
    t->page_size = PyLong_AsLongLong(args[6]);
    if (t->page_size == -1 && PyErr_Occurred()) return -1;
    PyObject *bufs[9] = {args[0], args[1], args[2], args[3], args[4], args[5], args[7], args[8], args[9]};
    if (get_buffers(bufs, v, "rrwrrrwww", 9) < 0) return -1;
    t->n = v[0].len / 8;
    t->n_trees = v[4].len / 8;
    int bad = v[1].len / 8 != t->n || v[2].len / 8 != t->n || v[3].len / 8 != t->n;
    for (int i = 5; i < 9; i++) bad |= v[i].len / 8 != t->n_trees;
    if (bad) {
        release(v, 9);
        PyErr_SetString(PyExc_ValueError, "read_trees: inconsistent array lengths");
        return -1;
    }
    t->clocks = v[0].buf, t->fds = v[1].buf, t->last = v[2].buf, t->owner = v[3].buf;
    t->roots = v[4].buf, t->gone = v[5].buf, t->cpu = v[6].buf, t->rss = v[7].buf;
    t->root_pages = v[8].buf;
    return 0;
}

/* read_trees(clocks, fds, cpu_last, owner, roots, gone, page_size, cpu, rss, root_pages) -> bool
 *
 * Members (all trees, flat): CPU clock clocks[i] (stored into cpu_last[i]) and the resident
 * pages of the statm file open as fds[i] (skipped if < 0). Per tree k: cpu[k] = gone[k] + the
 * sum of its members' clocks, rss[k] = their pages * page_size, root_pages[k] = the pages of
 * member roots[k] (-1 if none). False as soon as a CPU clock cannot be read (a member
 * exited): the caller then reads tree by tree in Python.
 */
static PyObject *read_trees(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 10) {
        PyErr_SetString(PyExc_TypeError,
                        "read_trees(clocks, fds, cpu_last, owner, roots, gone, page_size, cpu, rss, root_pages)");
        return NULL;
    }
    Py_buffer v[9];
    Trees t;
    if (trees_from_args(args, v, &t) < 0) return NULL;
    int ok = trees_read(&t);
    release(v, 9);
    return PyBool_FromLong(ok);
}

/* -- tcp_info over netlink ---------------------------------------------------------------- */

static inline uint32_t rd32(const unsigned char *p) { uint32_t x; memcpy(&x, p, 4); return x; }
static inline uint16_t rd16(const unsigned char *p) { uint16_t x; memcpy(&x, p, 2); return x; }
static inline uint64_t rd64(const unsigned char *p) { uint64_t x; memcpy(&x, p, 8); return x; }

typedef struct {
    int fd;
    const void *req;
    size_t req_len;
    uint32_t base;
    Py_ssize_t n, first, n_socks, n_targets;
    const int64_t *owner;
    int64_t *acked, *received, *tx, *rx;
    int64_t *gone; /* indices of sockets that are gone (capacity n) */
    Py_ssize_t n_gone;
} Batch;

/* Fold one netlink datagram into the counters; returns how many of the batch it answered. */
static Py_ssize_t fold_datagram(Batch *b, const unsigned char *d, size_t size) {
    Py_ssize_t answered = 0;
    size_t off = 0;
    while (off + NLMSG_HDR_LEN <= size) {
        uint32_t length = rd32(d + off);
        uint16_t type = rd16(d + off + 4);
        uint32_t seq = rd32(d + off + 8);
        if (length < NLMSG_HDR_LEN) break;
        int64_t i = (int64_t)seq - (int64_t)b->base;
        if (i >= 0 && i < b->n && (type == SOCK_DIAG_BY_FAMILY || type == NLMSG_ERROR_)) {
            answered++;
            Py_ssize_t j = b->first + (Py_ssize_t)i;
            int found = 0;
            if (type == SOCK_DIAG_BY_FAMILY) {
                size_t end = off + (length < size - off ? length : size - off);
                size_t a = off + NLMSG_HDR_LEN + DIAG_MSG_LEN;
                while (a + 4 <= end) {
                    uint16_t rta_len = rd16(d + a), rta_type = rd16(d + a + 2);
                    if (rta_len < 4) break;
                    if (rta_type == INET_DIAG_INFO_) {
                        if (rta_len >= INFO_RTA_MIN && a + INFO_RTA_MIN <= size) {
                            int64_t ak = (int64_t)rd64(d + a + 4 + TCPI_BYTES_OFFSET);
                            int64_t rc = (int64_t)rd64(d + a + 4 + TCPI_BYTES_OFFSET + 8);
                            if (ak > b->acked[j]) b->acked[j] = ak; /* never backwards */
                            if (rc > b->received[j]) b->received[j] = rc;
                            found = 1;
                        }
                        break;
                    }
                    a += (rta_len + 3u) & ~3u;
                }
            }
            if (!found && b->n_gone < b->n) b->gone[b->n_gone++] = j; /* its last counts stay */
            int64_t t = b->owner[j];
            if (t >= 0 && t < b->n_targets) {
                b->tx[t] += b->acked[j];
                b->rx[t] += b->received[j];
            }
        }
        off += (length + 3u) & ~3u;
    }
    return answered;
}

/* Send the batch and fold its n answers (recvmmsg, 8 at a time). 0, or -1 with errno set
 * (EAGAIN: an answer is missing). */
static int batch_run(Batch *b) {
    b->n_gone = 0;
    if (b->n == 0) return 0;
    ssize_t sent = send(b->fd, b->req, b->req_len, 0);
    if (sent != (ssize_t)b->req_len) {
        if (sent >= 0) errno = EIO;
        return -1;
    }
    struct mmsghdr msgs[SLOTS];
    struct iovec iov[SLOTS];
    Py_ssize_t answered = 0;
    while (answered < b->n) {
        unsigned want = (unsigned)(b->n - answered < SLOTS ? b->n - answered : SLOTS);
        for (unsigned k = 0; k < want; k++) {
            iov[k].iov_base = slots[k];
            iov[k].iov_len = SLOT;
            memset(&msgs[k].msg_hdr, 0, sizeof msgs[k].msg_hdr);
            msgs[k].msg_hdr.msg_iov = &iov[k];
            msgs[k].msg_hdr.msg_iovlen = 1;
        }
        int got = recvmmsg(b->fd, msgs, want, MSG_DONTWAIT, NULL);
        if (got <= 0) {
            if (got == 0) errno = EAGAIN;
            return -1;
        }
        for (int k = 0; k < got; k++) {
            size_t size = msgs[k].msg_len < SLOT ? msgs[k].msg_len : SLOT;
            answered += fold_datagram(b, slots[k], size);
        }
    }
    return 0;
}

/* args: sock_fd, requests, base, n, first, owner, acked, received, tx, rx (req, v released by caller) */
static int batch_from_args(PyObject *const *args, Py_buffer *req, Py_buffer *v, Batch *b) {
    b->fd = (int)PyLong_AsLong(args[0]);
    b->base = (uint32_t)PyLong_AsLongLong(args[2]);
    b->n = PyLong_AsSsize_t(args[3]);
    b->first = PyLong_AsSsize_t(args[4]);
    if (PyErr_Occurred()) return -1;
    if (PyObject_GetBuffer(args[1], req, PyBUF_SIMPLE) < 0) return -1;
    if (get_buffers(args + 5, v, "rwwww", 5) < 0) {
        PyBuffer_Release(req);
        return -1;
    }
    b->req = req->buf;
    b->req_len = (size_t)req->len;
    b->n_socks = v[0].len / 8;
    b->n_targets = v[3].len / 8;
    if (b->first < 0 || b->n < 0 || b->first + b->n > b->n_socks || v[1].len / 8 != b->n_socks
        || v[2].len / 8 != b->n_socks || v[4].len / 8 != b->n_targets) {
        PyBuffer_Release(req);
        release(v, 5);
        PyErr_SetString(PyExc_ValueError, "tcp_batch: inconsistent array lengths");
        return -1;
    }
    b->owner = v[0].buf, b->acked = v[1].buf, b->received = v[2].buf, b->tx = v[3].buf;
    b->rx = v[4].buf;
    return 0;
}

/* tcp_batch(sock_fd, requests, base, n, first, owner, acked, received, tx, rx) -> gone list
 *
 * Sends one prepared batch of n exact inet_diag lookups (sequence numbers base..base+n-1,
 * sockets first..first+n-1 of the arrays) and reads the n answers: each socket's counters are
 * raised to its answer (never lowered) and added to tx/rx[owner]. Returns the indices of the
 * sockets that are gone (error answer or no tcp_info). Raises BlockingIOError if an answer is
 * missing, like the Python version.
 */
static PyObject *tcp_batch(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 10) {
        PyErr_SetString(PyExc_TypeError,
                        "tcp_batch(sock_fd, requests, base, n, first, owner, acked, received, tx, rx)");
        return NULL;
    }
    Py_buffer req, v[5];
    Batch b;
    if (batch_from_args(args, &req, v, &b) < 0) return NULL;
    PyObject *out = NULL;
    b.gone = PyMem_Malloc(sizeof(int64_t) * (b.n > 0 ? b.n : 1));
    if (b.gone == NULL) {
        PyErr_NoMemory();
    } else if (batch_run(&b) < 0) {
        PyErr_SetFromErrno(PyExc_OSError); /* EAGAIN -> BlockingIOError */
    } else if ((out = PyList_New(b.n_gone)) != NULL) {
        for (Py_ssize_t i = 0; i < b.n_gone; i++) {
            PyObject *k = PyLong_FromLongLong(b.gone[i]);
            if (k == NULL) {
                Py_CLEAR(out);
                break;
            }
            PyList_SET_ITEM(out, i, k);
        }
    }
    PyMem_Free(b.gone);
    PyBuffer_Release(&req);
    release(v, 5);
    return out;
}

/* -- the sampling loop -------------------------------------------------------------------- */

/* state fields (array('q'), shared with sampler.NativeLoop) */
enum { NEXT_T, N_SAMPLES, N_LATE, N_RETRIED, MIN_SPAN, ADVANCE, N_OUT, PERIOD, DUE_NS, EVERY,
       MAX_SPAN, N_STATE };
/* why run_samples handed back */
enum { DUE = 0, STOP_FD = 1, SIGNAL = 2, IRREGULAR = 3 };

/* run_samples(state, stop_fd, trees, tcp, live, n_procs, veth_fds, veth_last, rows, spans) -> reason
 *
 * Repeats: [advance the grid (state[ADVANCE]), sleep until the next point while watching
 * stop_fd, take one sample] like Sampler.run/Sampler.sample, storing each sample's row per
 * live target into rows (target k's rows at k*cap .. k*cap+n_out, cap = len(spans)) and its
 * span into spans. Hands back:
 *   DUE       after a sample whose index is a multiple of state[EVERY] (interfaces are due),
 *             once monotonic time reaches state[DUE_NS] (the next walk), or when rows are full;
 *   STOP_FD   before sampling, when stop_fd is readable or hung up;
 *   SIGNAL    before sampling, when a signal arrived (its Python handler has run);
 *   IRREGULAR before storing, when a reading needs Python's judgement (a CPU clock that cannot
 *             be read, a root without memory, a socket gone, a missing answer): Python then
 *             takes this sample itself.
 * trees: the read_trees arguments; tcp: None or (sock_fd, requests, base, n, owner, acked,
 * received, closed_tx, closed_rx); veth_fds: 2 per target (host rx, host tx files; -1: tcp).
 */
static PyObject *run_samples(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 10) {
        PyErr_SetString(PyExc_TypeError,
                        "run_samples(state, stop_fd, trees, tcp, live, n_procs, veth_fds, veth_last, rows, spans)");
        return NULL;
    }
    PyObject *trees_args = args[2], *tcp_args = args[3];
    if (!PyTuple_Check(trees_args) || PyTuple_GET_SIZE(trees_args) != 10
        || (tcp_args != Py_None && (!PyTuple_Check(tcp_args) || PyTuple_GET_SIZE(tcp_args) != 9))) {
        PyErr_SetString(PyExc_TypeError, "run_samples: trees is a 10-tuple, tcp None or a 9-tuple");
        return NULL;
    }
    int stop_fd = (int)PyLong_AsLong(args[1]);
    if (stop_fd == -1 && PyErr_Occurred()) return NULL;
    PyObject *reason = NULL;
    int have_tcp = tcp_args != Py_None;
    Py_buffer vs[7], vt[9], vb[5], vreq;
    int n_vs = 0, n_vt = 0, n_vb = 0, have_req = 0;
    int64_t gone_buf[64];
    Trees t;
    Batch b;
    memset(&b, 0, sizeof b);

    if (get_buffers(args, vs, "w", 1) < 0) goto done;
    n_vs = 1;
    if (get_buffers(args + 4, vs + 1, "rrrwww", 6) < 0) goto done;
    n_vs = 7;
    if (trees_from_args(((PyTupleObject *)trees_args)->ob_item, vt, &t) < 0) goto done;
    n_vt = 9;
    int64_t *state = vs[0].buf;
    const int64_t *live = vs[1].buf, *n_procs = vs[2].buf, *veth_fds = vs[3].buf;
    int64_t *veth_last = vs[4].buf, *rows = vs[5].buf, *spans = vs[6].buf;
    Py_ssize_t n_targets = vs[1].len / 8, cap = vs[6].len / 8;
    int64_t *closed_tx = NULL, *closed_rx = NULL;
    if (vs[0].len / 8 != N_STATE || vs[2].len / 8 != n_targets || vs[3].len / 8 != 2 * n_targets
        || vs[4].len / 8 != 2 * n_targets || vs[5].len / 8 != cap * n_targets * ROW
        || t.n_trees != n_targets || n_targets > MAX_TARGETS || cap < 1 || state[PERIOD] <= 0
        || state[EVERY] <= 0) {
        PyErr_SetString(PyExc_ValueError, "run_samples: inconsistent arguments");
        goto done;
    }
    if (have_tcp) {
        PyObject *targs[10];
        for (int i = 0; i < 4; i++) targs[i] = PyTuple_GET_ITEM(tcp_args, i);
        targs[4] = PyLong_FromLong(0); /* first */
        if (targs[4] == NULL) goto done;
        for (int i = 4; i < 9; i++) targs[i + 1] = PyTuple_GET_ITEM(tcp_args, i);
        /* owner, acked, received, closed_tx, closed_rx: the last two are read-only totals here */
        int rc = batch_from_args(targs, &vreq, vb, &b);
        Py_DECREF(targs[4]);
        if (rc < 0) goto done;
        have_req = 1;
        n_vb = 5;
        if (b.n_targets != n_targets || b.n > 64) {
            PyErr_SetString(PyExc_ValueError, "run_samples: tcp totals per target, at most 64 sockets");
            goto done;
        }
        closed_tx = b.tx, closed_rx = b.rx;
        b.gone = gone_buf;
    }
    int64_t tx[MAX_TARGETS], rx[MAX_TARGETS];
    struct pollfd pfd = {stop_fd, POLLIN, 0};
    int nfds = stop_fd >= 0 ? 1 : 0;
    long long next_t = state[NEXT_T], period = state[PERIOD], min_span = state[MIN_SPAN];
    Py_ssize_t n_out = 0;
    int why = DUE;

    for (;;) {
        long long now = mono_ns();
        if (state[ADVANCE]) { /* Sampler.run: next grid point; late: skip the missed ones */
            next_t += period;
            if (now >= next_t) {
                next_t += ((now - next_t) / period + 1) * period;
                state[N_LATE]++;
            }
            state[ADVANCE] = 0;
        }
        struct timespec left = {0, 0};
        if (now < next_t) {
            long long d = next_t - now;
            left.tv_sec = d / 1000000000LL;
            left.tv_nsec = d % 1000000000LL;
        }
        int ready = ppoll(&pfd, nfds, &left, NULL);
        if (ready < 0 && errno == EINTR) {
            why = SIGNAL;
            break;
        }
        if (ready < 0) {
            PyErr_SetFromErrno(PyExc_OSError);
            goto done;
        }
        if (ready > 0) {
            why = STOP_FD;
            break;
        }
        /* Sampler.sample: one block of reads, again (up to twice) if it took too long */
        long long a = 0, bt = 0, span = 0;
        int irregular = 0;
        long long retried = state[N_RETRIED];
        for (int attempt = 0; attempt < 3; attempt++) {
            a = mono_ns();
            if (have_tcp) {
                memcpy(tx, closed_tx, sizeof(int64_t) * n_targets);
                memcpy(rx, closed_rx, sizeof(int64_t) * n_targets);
                b.tx = tx, b.rx = rx;
                if (batch_run(&b) < 0 || b.n_gone > 0) irregular = 1;
            }
            if (!trees_read(&t)) irregular = 1;
            for (Py_ssize_t k = 0; k < n_targets && !irregular; k++) {
                if (live[k] && t.root_pages[k] == 0) irregular = 1;
                if (veth_fds[2 * k] >= 0) { /* VethCounters.read: both or the last pair */
                    long long hrx = read_number((int)veth_fds[2 * k], 0);
                    long long htx = read_number((int)veth_fds[2 * k + 1], 0);
                    if (hrx >= 0 && htx >= 0) veth_last[2 * k] = hrx, veth_last[2 * k + 1] = htx;
                }
            }
            bt = mono_ns();
            if (irregular) break;
            span = bt - a;
            if (span <= state[MAX_SPAN] || span <= 3 * min_span) break;
            state[N_RETRIED]++;
        }
        if (irregular) {
            state[N_RETRIED] = retried; /* Python takes this sample from the start */
            why = IRREGULAR;
            break;
        }
        if (span < min_span) min_span = span;
        long long ts = (a + bt) / 2;
        for (Py_ssize_t k = 0; k < n_targets; k++) {
            if (!live[k]) continue;
            int64_t *row = rows + (k * cap + n_out) * ROW;
            row[0] = ts;
            row[1] = t.cpu[k];
            row[2] = t.rss[k];
            if (veth_fds[2 * k] >= 0) {
                row[3] = veth_last[2 * k];
                row[4] = veth_last[2 * k + 1];
            } else {
                row[3] = have_tcp ? tx[k] : 0;
                row[4] = have_tcp ? rx[k] : 0;
            }
            row[5] = n_procs[k];
        }
        spans[n_out++] = span;
        long long index = state[N_SAMPLES]++;
        state[ADVANCE] = 1;
        if (index % state[EVERY] == 0 || n_out == cap || mono_ns() >= state[DUE_NS]) {
            why = DUE;
            break;
        }
    }
    state[NEXT_T] = next_t;
    state[MIN_SPAN] = min_span;
    state[N_OUT] = n_out;
    if (why == SIGNAL && PyErr_CheckSignals() < 0) goto done; /* a handler raised */
    reason = PyLong_FromLong(why);
done:
    if (have_req) PyBuffer_Release(&vreq);
    release(vb, n_vb);
    release(vt, n_vt);
    release(vs, n_vs);
    return reason;
}

static PyMethodDef methods[] = {
    {"read_trees", (PyCFunction)(void (*)(void))read_trees, METH_FASTCALL,
     "read_trees(clocks, fds, cpu_last, owner, roots, gone, page_size, cpu, rss, root_pages) -> bool"},
    {"tcp_batch", (PyCFunction)(void (*)(void))tcp_batch, METH_FASTCALL,
     "tcp_batch(sock_fd, requests, base, n, first, owner, acked, received, tx, rx) -> gone"},
    {"run_samples", (PyCFunction)(void (*)(void))run_samples, METH_FASTCALL,
     "run_samples(state, stop_fd, trees, tcp, live, n_procs, veth_fds, veth_last, rows, spans) -> reason"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_fastread", NULL, -1, methods};

PyMODINIT_FUNC PyInit__fastread(void) {
    PyObject *m = PyModule_Create(&module);
    if (m != NULL && PyModule_AddIntConstant(m, "ABI", ABI) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
