/* Optional native reads for the 100 Hz sampler (module driple.collect.sampling._fastread).
 *
 * Why: a sampler that sleeps 10 ms between samples wakes up with cold caches, and then each
 * Python-level system call costs several microseconds of interpreter work on top of the
 * kernel's own. These two functions do, per call, exactly what the Python loops they replace
 * do (proctree.ProcessTree.sample, tcpinfo.TcpInfoReader._fold_python); the Python
 * versions stay the reference and the fallback when this module is not built.
 * No allocation per call except the small result objects; Linux only.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h> /* first: its pyconfig.h defines _GNU_SOURCE (recvmmsg) */

#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define ABI 2 /* bumped when a signature or a semantic changes; checked by native.py */

/* netlink / inet_diag constants, as in tcpinfo.py */
#define SOCK_DIAG_BY_FAMILY 20
#define NLMSG_ERROR_ 2
#define INET_DIAG_INFO_ 2
#define NLMSG_HDR_LEN 16
#define DIAG_MSG_LEN 72
#define TCPI_BYTES_OFFSET 120 /* u64 tcpi_bytes_acked, then u64 tcpi_bytes_received */
#define INFO_RTA_MIN (4 + TCPI_BYTES_OFFSET + 16)

#define SLOT 8192  /* one netlink answer per slot: ~0.5 kB each, never near 8 kB */
#define SLOTS 8    /* answers per recvmmsg */

static int get_buffers(PyObject *const *args, Py_buffer *views, const char *writable, int n) {
    for (int i = 0; i < n; i++) {
        int flags = PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | (writable[i] == 'w' ? PyBUF_WRITABLE : 0);
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

/* Resident pages: the 2nd field of a statm file ("size resident shared ..."); 0 if unreadable,
 * like int(data.split(None, 2)[1]) failing in Python. */
static long long statm_resident(int fd) {
    char buf[64];
    ssize_t got = pread(fd, buf, sizeof buf, 0);
    if (got <= 0) return 0;
    ssize_t j = 0;
    while (j < got && buf[j] == ' ') j++;
    while (j < got && buf[j] != ' ' && buf[j] != '\n') j++;
    while (j < got && buf[j] == ' ') j++;
    ssize_t start = j;
    long long pages = 0;
    while (j < got && buf[j] >= '0' && buf[j] <= '9') pages = pages * 10 + (buf[j++] - '0');
    if (j == start || (j < got && buf[j] != ' ' && buf[j] != '\n')) return 0;
    return pages;
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
    long long page_size = PyLong_AsLongLong(args[6]);
    if (page_size == -1 && PyErr_Occurred()) return NULL;
    PyObject *bufs[9] = {args[0], args[1], args[2], args[3], args[4], args[5], args[7], args[8], args[9]};
    Py_buffer v[9];
    if (get_buffers(bufs, v, "rrwrrrwww", 9) < 0) return NULL;
    Py_ssize_t n = v[0].len / 8, n_trees = v[4].len / 8;
    int bad = v[1].len / 8 != n || v[2].len / 8 != n || v[3].len / 8 != n;
    for (int i = 5; i < 9; i++) bad |= v[i].len / 8 != n_trees;
    if (bad) {
        release(v, 9);
        PyErr_SetString(PyExc_ValueError, "read_trees: inconsistent array lengths");
        return NULL;
    }
    const int64_t *clocks = v[0].buf, *fds = v[1].buf, *owner = v[3].buf, *roots = v[4].buf,
                  *gone = v[5].buf;
    int64_t *last = v[2].buf, *cpu = v[6].buf, *rss = v[7].buf, *root_pages = v[8].buf;
    for (Py_ssize_t k = 0; k < n_trees; k++) {
        cpu[k] = gone[k];
        rss[k] = 0;
        root_pages[k] = -1;
    }
    int ok = 1;
    for (Py_ssize_t i = 0; i < n; i++) {
        int64_t k = owner[i];
        struct timespec ts;
        if (k < 0 || k >= n_trees || clock_gettime((clockid_t)clocks[i], &ts) != 0) {
            ok = 0;
            break;
        }
        long long c = (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
        last[i] = c;
        cpu[k] += c;
        if (fds[i] < 0) continue;
        long long pages = statm_resident((int)fds[i]);
        rss[k] += pages * page_size;
        if (roots[k] == i) root_pages[k] = pages;
    }
    release(v, 9);
    return PyBool_FromLong(ok);
}

static inline uint32_t rd32(const unsigned char *p) { uint32_t x; memcpy(&x, p, 4); return x; }
static inline uint16_t rd16(const unsigned char *p) { uint16_t x; memcpy(&x, p, 2); return x; }
static inline uint64_t rd64(const unsigned char *p) { uint64_t x; memcpy(&x, p, 8); return x; }

/* Fold one netlink datagram into the counters; returns how many of the batch it answered. */
static Py_ssize_t fold_datagram(const unsigned char *d, size_t size, uint32_t base, Py_ssize_t n,
                                Py_ssize_t first, const int64_t *owner, int64_t *acked,
                                int64_t *received, int64_t *tx, int64_t *rx, Py_ssize_t n_targets,
                                PyObject *gone) {
    Py_ssize_t answered = 0;
    size_t off = 0;
    while (off + NLMSG_HDR_LEN <= size) {
        uint32_t length = rd32(d + off);
        uint16_t type = rd16(d + off + 4);
        uint32_t seq = rd32(d + off + 8);
        if (length < NLMSG_HDR_LEN) break;
        int64_t i = (int64_t)seq - (int64_t)base;
        if (i >= 0 && i < n && (type == SOCK_DIAG_BY_FAMILY || type == NLMSG_ERROR_)) {
            answered++;
            Py_ssize_t j = first + (Py_ssize_t)i;
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
                            if (ak > acked[j]) acked[j] = ak; /* never backwards */
                            if (rc > received[j]) received[j] = rc;
                            found = 1;
                        }
                        break;
                    }
                    a += (rta_len + 3u) & ~3u;
                }
            }
            if (!found) { /* gone: its last counts stay */
                PyObject *k = PyLong_FromSsize_t(j);
                if (k == NULL || PyList_Append(gone, k) < 0) {
                    Py_XDECREF(k);
                    return -1;
                }
                Py_DECREF(k);
            }
            int64_t t = owner[j];
            if (t >= 0 && t < n_targets) {
                tx[t] += acked[j];
                rx[t] += received[j];
            }
        }
        off += (length + 3u) & ~3u;
    }
    return answered;
}

/* tcp_batch(sock_fd, requests, base, n, first, owner, acked, received, tx, rx) -> gone list
 *
 * Sends one prepared batch of n exact inet_diag lookups (sequence numbers base..base+n-1,
 * sockets first..first+n-1 of the arrays) and reads the n answers with recvmmsg: each socket's
 * counters are raised to its answer (never lowered) and added to tx/rx[owner]. Returns the
 * indices of sockets that are gone (error answer or no tcp_info). Raises BlockingIOError if an
 * answer is missing, like the Python version.
 */
static PyObject *tcp_batch(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    static unsigned char slots[SLOTS][SLOT];
    if (nargs != 10) {
        PyErr_SetString(PyExc_TypeError,
                        "tcp_batch(sock_fd, requests, base, n, first, owner, acked, received, tx, rx)");
        return NULL;
    }
    int fd = (int)PyLong_AsLong(args[0]);
    long long base = PyLong_AsLongLong(args[2]);
    Py_ssize_t n = PyLong_AsSsize_t(args[3]), first = PyLong_AsSsize_t(args[4]);
    if (PyErr_Occurred()) return NULL;
    Py_buffer req;
    if (PyObject_GetBuffer(args[1], &req, PyBUF_SIMPLE) < 0) return NULL;
    Py_buffer v[5];
    if (get_buffers(args + 5, v, "rwwww", 5) < 0) {
        PyBuffer_Release(&req);
        return NULL;
    }
    Py_ssize_t n_socks = v[0].len / 8, n_targets = v[3].len / 8;
    if (first < 0 || n < 0 || first + n > n_socks || v[1].len / 8 != n_socks || v[2].len / 8 != n_socks
        || v[4].len / 8 != n_targets) {
        PyBuffer_Release(&req);
        release(v, 5);
        PyErr_SetString(PyExc_ValueError, "tcp_batch: inconsistent array lengths");
        return NULL;
    }
    PyObject *gone = PyList_New(0);
    if (gone == NULL) goto fail;
    ssize_t sent = send(fd, req.buf, (size_t)req.len, 0);
    if (sent != req.len) {
        if (sent >= 0) errno = EIO;
        PyErr_SetFromErrno(PyExc_OSError);
        goto fail;
    }
    struct mmsghdr msgs[SLOTS];
    struct iovec iov[SLOTS];
    Py_ssize_t answered = 0;
    while (answered < n) {
        unsigned want = (unsigned)(n - answered < SLOTS ? n - answered : SLOTS);
        for (unsigned k = 0; k < want; k++) {
            iov[k].iov_base = slots[k];
            iov[k].iov_len = SLOT;
            memset(&msgs[k].msg_hdr, 0, sizeof msgs[k].msg_hdr);
            msgs[k].msg_hdr.msg_iov = &iov[k];
            msgs[k].msg_hdr.msg_iovlen = 1;
        }
        int got = recvmmsg(fd, msgs, want, MSG_DONTWAIT, NULL);
        if (got < 0) {
            PyErr_SetFromErrno(PyExc_OSError); /* EAGAIN -> BlockingIOError */
            goto fail;
        }
        if (got == 0) {
            errno = EAGAIN;
            PyErr_SetFromErrno(PyExc_OSError);
            goto fail;
        }
        for (int k = 0; k < got; k++) {
            size_t size = msgs[k].msg_len < SLOT ? msgs[k].msg_len : SLOT;
            Py_ssize_t a = fold_datagram(slots[k], size, (uint32_t)base, n, first, v[0].buf, v[1].buf,
                                         v[2].buf, v[3].buf, v[4].buf, n_targets, gone);
            if (a < 0) goto fail;
            answered += a;
        }
    }
    PyBuffer_Release(&req);
    release(v, 5);
    return gone;
fail:
    Py_XDECREF(gone);
    PyBuffer_Release(&req);
    release(v, 5);
    return NULL;
}

static PyMethodDef methods[] = {
    {"read_trees", (PyCFunction)(void (*)(void))read_trees, METH_FASTCALL,
     "read_trees(clocks, fds, cpu_last, owner, roots, gone, page_size, cpu, rss, root_pages) -> bool"},
    {"tcp_batch", (PyCFunction)(void (*)(void))tcp_batch, METH_FASTCALL,
     "tcp_batch(sock_fd, requests, base, n, first, owner, acked, received, tx, rx) -> gone"},
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
