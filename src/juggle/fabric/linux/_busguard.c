/*
 * juggle.fabric.linux._busguard: aligned 32-bit MMIO that turns a SIGBUS into an exception.
 *
 * On a board, a load or store to a register window whose slot is decoupled, held in reset or
 * not programmed can end in a bus error, which Linux delivers to the accessing thread as a
 * synchronous SIGBUS (on arm64 an external abort on a user access, arch/arm64/mm/fault.c
 * do_sea(); on a file mapping, an access past the end of the file, mmap(2) "SIGBUS").
 * Left alone, the default action kills the whole process, and juggle's fault containment
 * never runs. Here every access runs under a guard:
 *
 *   - a Map owns an mmap(2) of a file or device (MAP_SHARED, PROT_READ | PROT_WRITE);
 *   - read32/write32 put a sigjmp_buf on their own stack, publish its address in a
 *     thread-local pointer (non-NULL = "this thread is inside a guarded access"), do one
 *     volatile 32-bit access and clear the pointer again;
 *   - one process-wide SIGBUS handler (sigaction, SA_SIGINFO | SA_NODEFER) siglongjmps to
 *     that buffer when the signal is a fault (si_code > 0, i.e. raised by the kernel for an
 *     access, not sent by kill(2)) and the faulting thread is armed; the access then raises
 *     BusFault(offset, fault address) instead of returning.
 *   - Any other SIGBUS is not ours: the handler puts the previous action back (the default,
 *     or faulthandler's) and, for a fault, returns, so the access executes again and meets
 *     that action; a signal sent by kill(2) is raised again. A bus error outside a guarded
 *     access therefore does what it did before this module was loaded.
 *
 * SA_NODEFER keeps SIGBUS unblocked while the handler runs, so leaving it by siglongjmp
 * needs no saved signal mask: sigsetjmp(buf, 0) saves none and costs no system call, which
 * keeps a guarded access at the price of a plain one plus a few stores. The thread-local is
 * one pointer with the initial-exec TLS model (static TLS: nothing is allocated when the
 * handler reads it, which keeps the handler async-signal-safe).
 *
 * The GIL stays held during an access (one access is short), so a Map cannot be closed
 * (munmap) by another Python thread in the middle of an access to it.
 *
 * Another library may install its own SIGBUS handler after this one (faulthandler.enable()
 * does): install() checks and takes the signal back; Map() calls it each time a map opens.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

typedef struct {
    sigjmp_buf jump;
    void *volatile addr; /* the faulting address, set by the handler */
} Guard;

static __thread Guard *volatile armed __attribute__((tls_model("initial-exec")));

static struct sigaction previous;      /* what SIGBUS did before install() */
static volatile sig_atomic_t installed; /* our handler is the current one */
static volatile sig_atomic_t passing;   /* a foreign SIGBUS went to `previous` */
static PyObject *BusFault;              /* juggle.fabric.linux._busguard.BusFault */

static void on_sigbus(int sig, siginfo_t *info, void *context) {
    (void)context;
    Guard *guard = armed;
    if (guard != NULL && info != NULL && info->si_code > 0) {
        armed = NULL;
        guard->addr = info->si_addr;
        siglongjmp(guard->jump, 1);
    }
    /* not a guarded access: give the signal back to its previous owner. If that owner hands
     * it back to us (faulthandler, enabled after install(), restores the handler it found,
     * ours, and raises again), the chain is a cycle: end it at the default action. */
    if (passing) {
        struct sigaction fallback;
        memset(&fallback, 0, sizeof fallback);
        fallback.sa_handler = SIG_DFL;
        sigemptyset(&fallback.sa_mask);
        sigaction(SIGBUS, &fallback, NULL);
    } else {
        passing = 1;
        sigaction(SIGBUS, &previous, NULL);
    }
    installed = 0;
    if (info == NULL || info->si_code <= 0) {
        raise(sig); /* sent by a process: deliver it again, now to the previous action */
    }
    /* a fault: returning re-executes the access, which faults again under that action */
}

static int install(void) {
    struct sigaction current;
    if (sigaction(SIGBUS, NULL, &current) != 0) {
        PyErr_SetFromErrno(PyExc_OSError);
        return -1;
    }
    if (installed && (current.sa_flags & SA_SIGINFO) && current.sa_sigaction == on_sigbus) {
        return 0;
    }
    struct sigaction ours;
    memset(&ours, 0, sizeof ours);
    ours.sa_sigaction = on_sigbus;
    ours.sa_flags = SA_SIGINFO | SA_NODEFER | SA_ONSTACK;
    sigemptyset(&ours.sa_mask);
    if (sigaction(SIGBUS, &ours, &previous) != 0) {
        PyErr_SetFromErrno(PyExc_OSError);
        return -1;
    }
    if ((previous.sa_flags & SA_SIGINFO) && previous.sa_sigaction == on_sigbus) {
        /* ours already (installed was reset by a foreign SIGBUS): keep the old previous */
        previous.sa_handler = SIG_DFL;
        previous.sa_flags = 0;
    }
    installed = 1;
    return 0;
}

/* One guarded access; 0 on success, -1 after a SIGBUS (fault address in *fault). Kept out of
 * line so the sigsetjmp frame is this small function's own. */
static __attribute__((noinline)) int guarded_read(volatile uint32_t *word, uint32_t *value,
                                                  void **fault) {
    Guard guard;
    guard.addr = NULL;
    if (sigsetjmp(guard.jump, 0) != 0) {
        *fault = guard.addr;
        return -1;
    }
    armed = &guard;
    *value = *word;
    armed = NULL;
    return 0;
}

static __attribute__((noinline)) int guarded_write(volatile uint32_t *word, uint32_t value,
                                                   void **fault) {
    Guard guard;
    guard.addr = NULL;
    if (sigsetjmp(guard.jump, 0) != 0) {
        *fault = guard.addr;
        return -1;
    }
    armed = &guard;
    *word = value;
    armed = NULL;
    return 0;
}

typedef struct {
    PyObject_HEAD
    char *base; /* NULL once closed */
    Py_ssize_t length;
} MapObject;

static PyObject *Map_new(PyTypeObject *type, PyObject *args, PyObject *kwds) {
    static char *kwlist[] = {"fd", "length", "offset", NULL};
    int fd;
    Py_ssize_t length;
    long long offset = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "in|L", kwlist, &fd, &length, &offset)) {
        return NULL;
    }
    if (length < 4 || length % 4) {
        PyErr_Format(PyExc_ValueError, "length %zd is not a positive multiple of 4", length);
        return NULL;
    }
    if (offset < 0 || offset % sysconf(_SC_PAGESIZE)) {
        PyErr_Format(PyExc_ValueError, "offset %lld is not a non-negative multiple of the page",
                     offset);
        return NULL;
    }
    if (install() < 0) {
        return NULL;
    }
    void *base = mmap(NULL, (size_t)length, PROT_READ | PROT_WRITE, MAP_SHARED, fd, (off_t)offset);
    if (base == MAP_FAILED) {
        return PyErr_SetFromErrno(PyExc_OSError);
    }
    MapObject *self = (MapObject *)type->tp_alloc(type, 0);
    if (self == NULL) {
        munmap(base, (size_t)length);
        return NULL;
    }
    self->base = base;
    self->length = length;
    return (PyObject *)self;
}

static void Map_unmap(MapObject *self) {
    if (self->base != NULL) {
        munmap(self->base, (size_t)self->length);
        self->base = NULL;
    }
}

static void Map_dealloc(MapObject *self) {
    Map_unmap(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* The word at byte offset `arg`, or NULL with IndexError/TypeError/ValueError set. */
static volatile uint32_t *Map_word(MapObject *self, PyObject *arg, Py_ssize_t *off) {
    *off = PyLong_AsSsize_t(arg);
    if (*off == -1 && PyErr_Occurred()) {
        if (PyErr_ExceptionMatches(PyExc_OverflowError)) {
            PyErr_Clear();
            PyErr_SetString(PyExc_IndexError, "offset out of range");
        }
        return NULL;
    }
    if (*off < 0 || *off > self->length - 4 || (*off & 3)) {
        PyErr_SetString(PyExc_IndexError, "offset out of range or not aligned");
        return NULL;
    }
    if (self->base == NULL) {
        PyErr_SetString(PyExc_ValueError, "map is closed");
        return NULL;
    }
    return (volatile uint32_t *)(self->base + *off);
}

static PyObject *fault(Py_ssize_t off, void *addr) {
    PyObject *exc_args = Py_BuildValue("(nK)", off, (unsigned long long)(uintptr_t)addr);
    if (exc_args != NULL) {
        PyErr_SetObject(BusFault, exc_args);
        Py_DECREF(exc_args);
    }
    return NULL;
}

static PyObject *Map_read32(MapObject *self, PyObject *arg) {
    Py_ssize_t off;
    volatile uint32_t *word = Map_word(self, arg, &off);
    if (word == NULL) {
        return NULL;
    }
    uint32_t value;
    void *addr;
    if (guarded_read(word, &value, &addr) != 0) {
        return fault(off, addr);
    }
    return PyLong_FromUnsignedLong(value);
}

static PyObject *Map_write32(MapObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "write32(offset, value) takes 2 arguments");
        return NULL;
    }
    Py_ssize_t off;
    volatile uint32_t *word = Map_word(self, args[0], &off);
    if (word == NULL) {
        return NULL;
    }
    unsigned long value = PyLong_AsUnsignedLong(args[1]);
    if (value == (unsigned long)-1 && PyErr_Occurred()) {
        if (PyErr_ExceptionMatches(PyExc_OverflowError)) {
            PyErr_Clear();
            PyErr_SetString(PyExc_OverflowError, "value is not in 0..0xFFFFFFFF");
        }
        return NULL;
    }
    if (value > 0xFFFFFFFFul) {
        PyErr_SetString(PyExc_OverflowError, "value is not in 0..0xFFFFFFFF");
        return NULL;
    }
    void *addr;
    if (guarded_write(word, (uint32_t)value, &addr) != 0) {
        return fault(off, addr);
    }
    Py_RETURN_NONE;
}

static PyObject *Map_close(MapObject *self, PyObject *Py_UNUSED(ignored)) {
    Map_unmap(self);
    Py_RETURN_NONE;
}

static PyObject *Map_get_closed(MapObject *self, void *Py_UNUSED(closure)) {
    return PyBool_FromLong(self->base == NULL);
}

static PyObject *Map_get_length(MapObject *self, void *Py_UNUSED(closure)) {
    return PyLong_FromSsize_t(self->length);
}

static PyMethodDef Map_methods[] = {
    {"read32", (PyCFunction)Map_read32, METH_O, "read32(offset): the 32-bit word, guarded"},
    {"write32", (PyCFunction)(void (*)(void))Map_write32, METH_FASTCALL,
     "write32(offset, value): store a 32-bit word, guarded"},
    {"close", (PyCFunction)Map_close, METH_NOARGS, "unmap (idempotent)"},
    {NULL},
};

static PyGetSetDef Map_getset[] = {
    {"closed", (getter)Map_get_closed, NULL, "True after close()", NULL},
    {"length", (getter)Map_get_length, NULL, "mapped length in bytes", NULL},
    {NULL},
};

static PyTypeObject MapType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "juggle.fabric.linux._busguard.Map",
    .tp_basicsize = sizeof(MapObject),
    .tp_dealloc = (destructor)Map_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Map(fd, length, offset=0): a MAP_SHARED mapping with SIGBUS-guarded access",
    .tp_methods = Map_methods,
    .tp_getset = Map_getset,
    .tp_new = Map_new,
};

static PyObject *mod_install(PyObject *mod, PyObject *Py_UNUSED(ignored)) {
    (void)mod;
    if (install() < 0) {
        return NULL;
    }
    Py_RETURN_NONE;
}

static PyObject *mod_installed(PyObject *mod, PyObject *Py_UNUSED(ignored)) {
    (void)mod;
    struct sigaction current;
    if (sigaction(SIGBUS, NULL, &current) != 0) {
        return PyErr_SetFromErrno(PyExc_OSError);
    }
    return PyBool_FromLong(installed && (current.sa_flags & SA_SIGINFO) &&
                           current.sa_sigaction == on_sigbus);
}

static PyMethodDef module_methods[] = {
    {"install", mod_install, METH_NOARGS,
     "install(): make the SIGBUS handler the current one (idempotent)"},
    {"installed", mod_installed, METH_NOARGS, "installed(): is the SIGBUS handler current"},
    {NULL},
};

static struct PyModuleDef moduledef = {
    PyModuleDef_HEAD_INIT, "juggle.fabric.linux._busguard",
    "SIGBUS-guarded 32-bit access to a mapped file or device.", -1, module_methods,
};

PyMODINIT_FUNC PyInit__busguard(void) {
    if (PyType_Ready(&MapType) < 0) {
        return NULL;
    }
    PyObject *m = PyModule_Create(&moduledef);
    if (m == NULL) {
        return NULL;
    }
    BusFault = PyErr_NewExceptionWithDoc(
        "juggle.fabric.linux._busguard.BusFault",
        "A guarded access raised SIGBUS; args: (offset, faulting address).", NULL, NULL);
    if (BusFault == NULL || PyModule_AddObjectRef(m, "BusFault", BusFault) < 0 ||
        PyModule_AddObjectRef(m, "Map", (PyObject *)&MapType) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
