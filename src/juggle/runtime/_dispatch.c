/*
 * juggle.runtime._dispatch: the compiled call path of service proxies.
 *
 * A proxy method is a TracedMethod: calling it reads the dispatcher's current Slot (one
 * implementation at one tier), counts the call in flight on that slot, forwards the call with
 * vectorcall, and records count, errors, total and a log-linear duration histogram per method.
 * Switching is Dispatcher.switch(new_slot): one pointer store under the GIL, so it is atomic for
 * new calls while calls already running keep a reference to the slot they started on.
 *
 * Before anything else a TracedMethod checks the caller's arguments against the interface's
 * signature: a call without keywords costs one subtraction and one comparison of its positional
 * count (TracedMethod_vectorcall); any other call is checked out of line (check_call: keyword
 * names looked up among the parameter names, required ones covered). A call that does not fit
 * goes to the `reject` callable given at construction, which raises the caller's error; such a
 * call never reaches the slot and is not counted.
 *
 * The pure-Python twin in _pydispatch.py has the same API and semantics.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <stdint.h>
#include <time.h>
#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#define JUGGLE_HAVE_TSC 1
#endif

#define SUB_BITS 3
#define SUBS (1 << SUB_BITS)
#define LINEAR 16
#define OCTAVES 44
#define NBUCKETS (LINEAR + (OCTAVES - 4) * SUBS)

typedef struct {
    uint64_t calls;
    uint64_t timed;  /* calls whose duration was taken (see sample_mask) */
    uint64_t errors;
    uint64_t total_ticks;
    uint64_t max_ticks;
    uint64_t hist[NBUCKETS];
} MethodStats;

typedef struct {
    PyObject_HEAD
    PyObject *impl;
    PyObject *tier;
    PyObject *names;     /* tuple of str */
    PyObject **methods;  /* bound methods, one per name */
    PyObject **funcs;    /* the plain functions behind them, or NULL: called with impl prepended */
    Py_ssize_t nmethods;
    Py_ssize_t inflight;
    uint64_t sample_mask; /* after EXACT_CALLS calls, time one call in (mask + 1) */
    MethodStats *stats;
    PyObject *on_drained; /* called with no argument when inflight drops to 0, or NULL */
} SlotObject;

/* The first EXACT_CALLS calls of each method are all timed, so quiet services get exact
 * figures; after that one call in (sample_mask + 1) is, which keeps tracing of hot services
 * cheap while mean/p50/p99 stay unbiased estimates. Counts and in-flight are always exact. */
#define EXACT_CALLS 1024

typedef struct {
    PyObject_HEAD
    SlotObject *slot;
} DispatcherObject;

/* How a TracedMethod checks calls with keyword arguments (see check_call). */
#define CHECK_NONE 0  /* no check: anything goes to the implementation */
#define CHECK_EXACT 1 /* names and required parameters are checked here */
#define CHECK_REJECT 2 /* too many parameters for the masks: reject() decides keyword calls */

typedef struct {
    PyObject_HEAD
    DispatcherObject *dispatcher;
    Py_ssize_t index;
    vectorcallfunc vectorcall;
    /* A call without keywords, nargs counting the proxy, fits iff nargs - min_nargs <= span as
     * unsigned numbers: one subtraction and one comparison (a call without its proxy or with
     * no fitting count never passes: min_nargs >= 1, and 2^63 for "none fits"). */
    size_t min_nargs;
    size_t span;
    /* the interface's signature, the proxy left out (the caller's positional count is n): */
    int check;           /* CHECK_* */
    int varkw;           /* takes **kwargs: unknown keyword names are accepted */
    Py_ssize_t max_pos;  /* the most positional arguments (PY_SSIZE_T_MAX: *args) */
    Py_ssize_t npos;     /* params[:npos] take positional arguments ... */
    Py_ssize_t posonly;  /* ... of which params[:posonly] cannot be given by keyword */
    uint64_t required;   /* bit i: params[i] has no default */
    PyObject *params;    /* tuple of str (NULL: CHECK_NONE) */
    PyObject *reject;    /* reject(args, kwargs): raises the caller's error; returns if it fits */
} TracedMethodObject;

static PyTypeObject SlotType;
static PyTypeObject DispatcherType;
static PyTypeObject TracedMethodType;

/* set_error_hook(passthrough, hook): an exception an implementation raises that is not an
 * instance of `passthrough` (the runtime's own error tree) is handed to hook(exc, impl, name),
 * which raises the error the caller gets instead (chained to exc). */
static PyObject *passthrough_type = NULL;
static PyObject *error_hook = NULL;

static void translate_error(SlotObject *slot, Py_ssize_t i) {
    if (error_hook == NULL || PyErr_ExceptionMatches(passthrough_type) ||
        !PyErr_ExceptionMatches(PyExc_Exception)) {
        return;
    }
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    PyErr_NormalizeException(&type, &value, &tb);
    if (tb != NULL) {
        PyException_SetTraceback(value, tb);
    }
    PyObject *r = PyObject_CallFunctionObjArgs(error_hook, value, slot->impl,
                                               PyTuple_GET_ITEM(slot->names, i), NULL);
    if (r != NULL) { /* the hook did not raise: the original error stands */
        Py_DECREF(r);
        PyErr_Restore(type, value, tb);
        return;
    }
    Py_XDECREF(type);
    Py_XDECREF(value);
    Py_XDECREF(tb);
}

static inline uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Call durations are taken in ticks: the CPU's invariant time-stamp counter where there is one
 * (a few ns to read, against ~25 ns for clock_gettime), else monotonic ns. Ticks become ns with
 * a ratio measured against CLOCK_MONOTONIC since import (tick_ratio()). */
static uint64_t origin_ticks, origin_ns;

static inline uint64_t now_ticks(void) {
#ifdef JUGGLE_HAVE_TSC
    return __rdtsc();
#else
    return now_ns();
#endif
}

static inline Py_ssize_t bucket_of(uint64_t v) {
    if (v < LINEAR) {
        return (Py_ssize_t)v;
    }
    int e = 63 - __builtin_clzll(v); /* v in [2^e, 2^(e+1)), e >= 4 */
    if (e >= OCTAVES) {
        return NBUCKETS - 1;
    }
    Py_ssize_t sub = (Py_ssize_t)((v >> (e - SUB_BITS)) & (SUBS - 1));
    return LINEAR + (Py_ssize_t)(e - 4) * SUBS + sub;
}

/* ---------------------------------------------------------------- Slot */

static int slot_clear_methods(SlotObject *self) {
    if (self->methods != NULL) {
        for (Py_ssize_t i = 0; i < self->nmethods; i++) {
            Py_CLEAR(self->methods[i]);
        }
        PyMem_Free(self->methods);
        self->methods = NULL;
    }
    if (self->funcs != NULL) {
        for (Py_ssize_t i = 0; i < self->nmethods; i++) {
            Py_CLEAR(self->funcs[i]);
        }
        PyMem_Free(self->funcs);
        self->funcs = NULL;
    }
    return 0;
}

static int Slot_init(SlotObject *self, PyObject *args, PyObject *kwds) {
    static char *kwlist[] = {"impl", "names", "tier", "sample_period", NULL};
    PyObject *impl, *names, *tier = Py_None;
    unsigned long long period = 8;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OO!|OK", kwlist, &impl, &PyTuple_Type,
                                     &names, &tier, &period)) {
        return -1;
    }
    if (period == 0 || (period & (period - 1)) != 0) {
        PyErr_Format(PyExc_ValueError, "sample_period must be a power of two >= 1, got %llu",
                     period);
        return -1;
    }
    self->sample_mask = (uint64_t)(period - 1);
    if (self->methods != NULL) {
        PyErr_SetString(PyExc_TypeError, "Slot is already initialised");
        return -1;
    }
    Py_ssize_t n = PyTuple_GET_SIZE(names);
    self->methods = PyMem_Calloc((size_t)(n > 0 ? n : 1), sizeof(PyObject *));
    self->funcs = PyMem_Calloc((size_t)(n > 0 ? n : 1), sizeof(PyObject *));
    self->stats = PyMem_Calloc((size_t)(n > 0 ? n : 1), sizeof(MethodStats));
    if (self->methods == NULL || self->funcs == NULL || self->stats == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    self->nmethods = n;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *name = PyTuple_GET_ITEM(names, i);
        if (!PyUnicode_Check(name)) {
            PyErr_Format(PyExc_TypeError, "method names must be str, got %R", name);
            return -1;
        }
        PyObject *bound = PyObject_GetAttr(impl, name);
        if (bound == NULL) {
            return -1;
        }
        if (!PyCallable_Check(bound)) {
            PyErr_Format(PyExc_TypeError, "%R of %R is not callable", name, impl);
            Py_DECREF(bound);
            return -1;
        }
        self->methods[i] = bound;
        if (PyMethod_Check(bound) && PyMethod_GET_SELF(bound) == impl &&
            PyFunction_Check(PyMethod_GET_FUNCTION(bound))) {
            self->funcs[i] = Py_NewRef(PyMethod_GET_FUNCTION(bound));
        }
    }
    Py_INCREF(impl);
    self->impl = impl;
    Py_INCREF(names);
    self->names = names;
    Py_INCREF(tier);
    self->tier = tier;
    return 0;
}

static int Slot_traverse(SlotObject *self, visitproc visit, void *arg) {
    Py_VISIT(self->on_drained);
    Py_VISIT(self->impl);
    Py_VISIT(self->tier);
    Py_VISIT(self->names);
    for (Py_ssize_t i = 0; self->methods != NULL && i < self->nmethods; i++) {
        Py_VISIT(self->methods[i]);
    }
    for (Py_ssize_t i = 0; self->funcs != NULL && i < self->nmethods; i++) {
        Py_VISIT(self->funcs[i]);
    }
    return 0;
}

static int Slot_clear(SlotObject *self) {
    Py_CLEAR(self->on_drained);
    Py_CLEAR(self->impl);
    Py_CLEAR(self->tier);
    Py_CLEAR(self->names);
    slot_clear_methods(self);
    return 0;
}

static void Slot_dealloc(SlotObject *self) {
    PyObject_GC_UnTrack(self);
    Slot_clear(self);
    PyMem_Free(self->stats);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *Slot_get_inflight(SlotObject *self, void *closure) {
    return PyLong_FromSsize_t(self->inflight);
}

static PyObject *Slot_get_on_drained(SlotObject *self, void *closure) {
    return Py_NewRef(self->on_drained != NULL ? self->on_drained : Py_None);
}

static int Slot_set_on_drained(SlotObject *self, PyObject *value, void *closure) {
    if (value == NULL || value == Py_None) {
        Py_CLEAR(self->on_drained);
        return 0;
    }
    if (!PyCallable_Check(value)) {
        PyErr_Format(PyExc_TypeError, "on_drained must be callable or None, got %R", value);
        return -1;
    }
    Py_XSETREF(self->on_drained, Py_NewRef(value));
    return 0;
}

/* The last call running on a slot ended: tell whoever waits for the slot to drain. Runs with
 * the GIL held right after the decrement, so a waiter that set on_drained and then read
 * inflight cannot miss it. An exception in the callback must not replace the call's result. */
static void slot_notify_drained(SlotObject *slot) {
    PyObject *callback = Py_NewRef(slot->on_drained);
    PyObject *type, *value, *traceback;
    PyErr_Fetch(&type, &value, &traceback);
    PyObject *r = PyObject_CallNoArgs(callback);
    if (r == NULL) {
        PyErr_WriteUnraisable(callback);
    }
    Py_XDECREF(r);
    PyErr_Restore(type, value, traceback);
    Py_DECREF(callback);
}

static PyObject *Slot_stats(SlotObject *self, PyObject *unused) {
    /* [(name, calls, timed, errors, total_ticks, max_ticks, histogram bytes), ...] */
    PyObject *out = PyList_New(self->nmethods);
    if (out == NULL) {
        return NULL;
    }
    for (Py_ssize_t i = 0; i < self->nmethods; i++) {
        MethodStats *st = &self->stats[i];
        PyObject *hist = PyBytes_FromStringAndSize((const char *)st->hist, sizeof(st->hist));
        if (hist == NULL) {
            Py_DECREF(out);
            return NULL;
        }
        PyObject *row = Py_BuildValue("(OKKKKKN)", PyTuple_GET_ITEM(self->names, i),
                                      (unsigned long long)st->calls,
                                      (unsigned long long)st->timed,
                                      (unsigned long long)st->errors,
                                      (unsigned long long)st->total_ticks,
                                      (unsigned long long)st->max_ticks, hist);
        if (row == NULL) {
            Py_DECREF(out);
            return NULL;
        }
        PyList_SET_ITEM(out, i, row);
    }
    return out;
}

static PyObject *Slot_repr(SlotObject *self) {
    return PyUnicode_FromFormat("<Slot tier=%R impl=%R inflight=%zd>", self->tier, self->impl,
                                self->inflight);
}

static PyMemberDef Slot_members[] = {
    {"impl", T_OBJECT, offsetof(SlotObject, impl), READONLY, "the implementation object"},
    {"tier", T_OBJECT, offsetof(SlotObject, tier), READONLY, "tier label"},
    {"names", T_OBJECT, offsetof(SlotObject, names), READONLY, "method names"},
    {NULL},
};

static PyGetSetDef Slot_getset[] = {
    {"inflight", (getter)Slot_get_inflight, NULL, "calls running on this slot now", NULL},
    {"on_drained", (getter)Slot_get_on_drained, (setter)Slot_set_on_drained,
     "callable run (no arguments) each time the in-flight count drops to 0, or None", NULL},
    {NULL},
};

static PyMethodDef Slot_methods[] = {
    {"stats", (PyCFunction)Slot_stats, METH_NOARGS, "per-method counters and histograms"},
    {NULL},
};

static PyTypeObject SlotType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "juggle.runtime._dispatch.Slot",
    .tp_basicsize = sizeof(SlotObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "One implementation of a service at one tier, with call counters.",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Slot_init,
    .tp_dealloc = (destructor)Slot_dealloc,
    .tp_traverse = (traverseproc)Slot_traverse,
    .tp_clear = (inquiry)Slot_clear,
    .tp_repr = (reprfunc)Slot_repr,
    .tp_members = Slot_members,
    .tp_getset = Slot_getset,
    .tp_methods = Slot_methods,
};

/* ---------------------------------------------------------------- Dispatcher */

static int Dispatcher_init(DispatcherObject *self, PyObject *args, PyObject *kwds) {
    static char *kwlist[] = {"slot", NULL};
    SlotObject *slot;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O!", kwlist, &SlotType, &slot)) {
        return -1;
    }
    Py_INCREF(slot);
    Py_XSETREF(self->slot, slot);
    return 0;
}

static int Dispatcher_traverse(DispatcherObject *self, visitproc visit, void *arg) {
    Py_VISIT(self->slot);
    return 0;
}

static int Dispatcher_clear(DispatcherObject *self) {
    Py_CLEAR(self->slot);
    return 0;
}

static void Dispatcher_dealloc(DispatcherObject *self) {
    PyObject_GC_UnTrack(self);
    Dispatcher_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *Dispatcher_switch(DispatcherObject *self, PyObject *arg) {
    if (!PyObject_TypeCheck(arg, &SlotType)) {
        PyErr_Format(PyExc_TypeError, "switch() needs a Slot, got %R", arg);
        return NULL;
    }
    SlotObject *old = self->slot;
    Py_INCREF(arg);
    self->slot = (SlotObject *)arg;
    return (PyObject *)old; /* reference handed to the caller */
}

static PyObject *Dispatcher_get_slot(DispatcherObject *self, void *closure) {
    Py_INCREF(self->slot);
    return (PyObject *)self->slot;
}

static PyGetSetDef Dispatcher_getset[] = {
    {"slot", (getter)Dispatcher_get_slot, NULL, "the slot new calls go to", NULL},
    {NULL},
};

static PyMethodDef Dispatcher_methods[] = {
    {"switch", (PyCFunction)Dispatcher_switch, METH_O,
     "switch(slot) -> old slot: new calls go to slot from now on"},
    {NULL},
};

static PyTypeObject DispatcherType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "juggle.runtime._dispatch.Dispatcher",
    .tp_basicsize = sizeof(DispatcherObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "Holds the current slot of one proxy; switch() is atomic for new calls.",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Dispatcher_init,
    .tp_dealloc = (destructor)Dispatcher_dealloc,
    .tp_traverse = (traverseproc)Dispatcher_traverse,
    .tp_clear = (inquiry)Dispatcher_clear,
    .tp_getset = Dispatcher_getset,
    .tp_methods = Dispatcher_methods,
};

/* ---------------------------------------------------------------- TracedMethod */

/* Calling convention: a TracedMethod is a class attribute of a per-proxy class and behaves as
 * a method descriptor, so the interpreter calls it with the proxy as args[0] (no bound-method
 * object is made). The proxy is replaced by the implementation for the onward call. */
#define SMALL_ARGS 8

static inline PyObject *call_impl(SlotObject *slot, Py_ssize_t i, PyObject *const *args,
                                  size_t nargsf, PyObject *kwnames) {
    /* args[0] is the proxy; args[1:] are the caller's arguments */
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    PyObject *func = slot->funcs[i];
    if (func != NULL && (nargsf & PY_VECTORCALL_ARGUMENTS_OFFSET)) {
        /* args lives on the caller's value stack: lend args[0] to self for the call */
        PyObject **stack = (PyObject **)args;
        PyObject *saved = stack[0];
        stack[0] = slot->impl;
        PyObject *result = PyObject_Vectorcall(func, stack, (size_t)nargs, kwnames);
        stack[0] = saved;
        return result;
    }
    Py_ssize_t total = nargs - 1 + (kwnames != NULL ? PyTuple_GET_SIZE(kwnames) : 0);
    if (func != NULL && total < SMALL_ARGS) {
        PyObject *buf[SMALL_ARGS + 1];
        buf[0] = slot->impl;
        for (Py_ssize_t k = 0; k < total; k++) {
            buf[k + 1] = args[k + 1];
        }
        return PyObject_Vectorcall(func, buf, (size_t)nargs, kwnames);
    }
    return PyObject_Vectorcall(slot->methods[i], args + 1,
                               (size_t)(nargs - 1) | PY_VECTORCALL_ARGUMENTS_OFFSET, kwnames);
}

/* The call does not fit the fast checks: reject(args, kwargs) says why (it raises), or that it
 * fits after all (it returns). 0: the call goes on; -1: the error is set. */
static int reject_call(TracedMethodObject *self, PyObject *const *args, Py_ssize_t nargs,
                       PyObject *kwnames) {
    if (self->reject == NULL) {
        return 0;
    }
    Py_ssize_t n = nargs - 1;
    PyObject *tuple = PyTuple_New(n);
    PyObject *kwargs = PyDict_New();
    if (tuple == NULL || kwargs == NULL) {
        goto fail;
    }
    for (Py_ssize_t k = 0; k < n; k++) {
        PyTuple_SET_ITEM(tuple, k, Py_NewRef(args[k + 1]));
    }
    Py_ssize_t nkw = kwnames != NULL ? PyTuple_GET_SIZE(kwnames) : 0;
    for (Py_ssize_t k = 0; k < nkw; k++) {
        if (PyDict_SetItem(kwargs, PyTuple_GET_ITEM(kwnames, k), args[nargs + k]) < 0) {
            goto fail;
        }
    }
    PyObject *r = PyObject_CallFunctionObjArgs(self->reject, tuple, kwargs, NULL);
    Py_DECREF(tuple);
    Py_DECREF(kwargs);
    if (r == NULL) {
        return -1;
    }
    Py_DECREF(r);
    return 0;
fail:
    Py_XDECREF(tuple);
    Py_XDECREF(kwargs);
    return -1;
}

/* Index of keyword `name` among the parameters that can be given by keyword, or -1. */
static Py_ssize_t keyword_index(TracedMethodObject *self, PyObject *name) {
    Py_ssize_t count = PyTuple_GET_SIZE(self->params);
    for (Py_ssize_t j = self->posonly; j < count; j++) {
        if (PyTuple_GET_ITEM(self->params, j) == name) { /* both interned: the usual case */
            return j;
        }
    }
    for (Py_ssize_t j = self->posonly; j < count; j++) {
        if (PyUnicode_Compare(PyTuple_GET_ITEM(self->params, j), name) == 0) {
            return j;
        }
    }
    return -1;
}

/* A call the one-comparison test did not pass: it has keywords, or its positional count is
 * out of range (or it came without its proxy). Keywords: every name known (or **kwargs), none
 * given twice, nothing required left out. 0: the call goes on; -1: the error is set (reject()
 * raised). */
static int check_call(TracedMethodObject *self, PyObject *const *args, Py_ssize_t nargs,
                      PyObject *kwnames) {
    if (nargs < 1) {
        PyErr_SetString(PyExc_TypeError, "traced method called without its proxy");
        return -1;
    }
    if (kwnames == NULL || PyTuple_GET_SIZE(kwnames) == 0) {
        if ((size_t)nargs - self->min_nargs > self->span) {
            return reject_call(self, args, nargs, kwnames);
        }
        return 0;
    }
    if (self->check == CHECK_NONE) {
        return 0;
    }
    Py_ssize_t n = nargs - 1;
    if (self->check == CHECK_REJECT || n > self->max_pos) {
        return reject_call(self, args, nargs, kwnames);
    }
    Py_ssize_t given = n < self->npos ? n : self->npos; /* parameters filled by position */
    uint64_t covered = given >= 64 ? ~(uint64_t)0 : (((uint64_t)1 << given) - 1);
    Py_ssize_t nkw = PyTuple_GET_SIZE(kwnames);
    for (Py_ssize_t k = 0; k < nkw; k++) {
        Py_ssize_t j = keyword_index(self, PyTuple_GET_ITEM(kwnames, k));
        if (j < 0) {
            if (self->varkw) {
                continue;
            }
            return reject_call(self, args, nargs, kwnames);
        }
        if (j < given) { /* given by position too */
            return reject_call(self, args, nargs, kwnames);
        }
        covered |= (uint64_t)1 << j;
    }
    if (self->required & ~covered) {
        return reject_call(self, args, nargs, kwnames);
    }
    return 0;
}

/* The call itself, its arguments checked: forward to the current slot and trace it. */
static inline PyObject *traced_call(TracedMethodObject *self, PyObject *const *args,
                                    size_t nargsf, PyObject *kwnames) {
    SlotObject *slot = self->dispatcher->slot;
    Py_ssize_t i = self->index;
    MethodStats *st = &slot->stats[i];
    Py_INCREF(slot);
    slot->inflight++;
    uint64_t n = st->calls++;
    int timed = n < EXACT_CALLS || (n & slot->sample_mask) == 0;
    PyObject *result;
    if (timed) {
        uint64_t t0 = now_ticks();
        result = call_impl(slot, i, args, nargsf, kwnames);
        uint64_t dt = now_ticks() - t0;
        st->timed++;
        st->total_ticks += dt;
        if (dt > st->max_ticks) {
            st->max_ticks = dt;
        }
        st->hist[bucket_of(dt)]++;
    }
    else {
        result = call_impl(slot, i, args, nargsf, kwnames);
    }
    slot->inflight--;
    if (result == NULL) {
        st->errors++;
        translate_error(slot, i);
    }
    if (slot->inflight == 0 && slot->on_drained != NULL) {
        slot_notify_drained(slot);
    }
    Py_DECREF(slot);
    return result;
}

/* A call the one-comparison test did not pass: checked in full first (out of line, so that
 * the usual call's path holds nothing more than that test). */
static Py_NO_INLINE PyObject *checked_call(TracedMethodObject *self, PyObject *const *args,
                                           size_t nargsf, PyObject *kwnames) {
    if (check_call(self, args, PyVectorcall_NARGS(nargsf), kwnames) < 0) {
        return NULL;
    }
    return traced_call(self, args, nargsf, kwnames);
}

static PyObject *TracedMethod_vectorcall(PyObject *callable, PyObject *const *args,
                                         size_t nargsf, PyObject *kwnames) {
    TracedMethodObject *self = (TracedMethodObject *)callable;
    if (kwnames != NULL || (size_t)PyVectorcall_NARGS(nargsf) - self->min_nargs > self->span) {
        return checked_call(self, args, nargsf, kwnames);
    }
    return traced_call(self, args, nargsf, kwnames);
}

static PyObject *TracedMethod_descr_get(PyObject *self, PyObject *obj, PyObject *type) {
    if (obj == NULL || obj == Py_None) {
        return Py_NewRef(self);
    }
    return PyMethod_New(self, obj);
}

/* Positional counts (the proxy left out) a call without keywords may pass: min..max, max -1
 * meaning any number and min -1 none at all. */
static void set_range(TracedMethodObject *self, Py_ssize_t min_pos, Py_ssize_t max_pos) {
    self->max_pos = max_pos < 0 ? PY_SSIZE_T_MAX : max_pos;
    if (min_pos < 0 || min_pos > self->max_pos) { /* no count fits */
        self->min_nargs = (size_t)PY_SSIZE_T_MAX + 1;
        self->span = 0;
        return;
    }
    self->min_nargs = (size_t)min_pos + 1;
    self->span = (size_t)(self->max_pos - min_pos);
}

/* check = (params, positional, positional_only, min_positional, max_positional, required_mask,
 * varkw, reject): see juggle.runtime.interfaces.Arguments (min -1: no call without keywords
 * fits; max -1: any number). */
static int TracedMethod_set_check(TracedMethodObject *self, PyObject *check) {
    PyObject *params, *required, *reject;
    Py_ssize_t npos, posonly, min_pos, max_pos;
    int varkw;
    if (!PyTuple_Check(check) ||
        !PyArg_ParseTuple(check, "O!nnnnO!pO;check must be (params, positional, positional_only,"
                                 " min_positional, max_positional, required_mask, varkw, reject)",
                          &PyTuple_Type, &params, &npos, &posonly, &min_pos, &max_pos,
                          &PyLong_Type, &required, &varkw, &reject)) {
        if (!PyErr_Occurred()) {
            PyErr_Format(PyExc_TypeError, "check must be a tuple or None, got %R", check);
        }
        return -1;
    }
    Py_ssize_t count = PyTuple_GET_SIZE(params);
    if (npos < 0 || npos > count || posonly < 0 || posonly > npos || min_pos < -1 ||
        max_pos < -1 || !PyCallable_Check(reject)) {
        PyErr_SetString(PyExc_ValueError, "check: inconsistent counts or reject not callable");
        return -1;
    }
    for (Py_ssize_t j = 0; j < count; j++) {
        if (!PyUnicode_Check(PyTuple_GET_ITEM(params, j))) {
            PyErr_SetString(PyExc_TypeError, "check: parameter names must be str");
            return -1;
        }
    }
    uint64_t mask = 0;
    int exact = count <= 64;
    if (exact) {
        mask = (uint64_t)PyLong_AsUnsignedLongLong(required);
        if (mask == (uint64_t)-1 && PyErr_Occurred()) {
            return -1;
        }
    }
    self->check = exact ? CHECK_EXACT : CHECK_REJECT;
    self->varkw = varkw;
    set_range(self, min_pos, max_pos);
    self->npos = npos;
    self->posonly = posonly;
    self->required = mask;
    Py_XSETREF(self->params, Py_NewRef(params));
    Py_XSETREF(self->reject, Py_NewRef(reject));
    return 0;
}

static int TracedMethod_init(TracedMethodObject *self, PyObject *args, PyObject *kwds) {
    static char *kwlist[] = {"dispatcher", "index", "check", NULL};
    DispatcherObject *dispatcher;
    Py_ssize_t index;
    PyObject *check = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O!n|O", kwlist, &DispatcherType, &dispatcher,
                                     &index, &check)) {
        return -1;
    }
    if (dispatcher->slot == NULL || index < 0 || index >= dispatcher->slot->nmethods) {
        PyErr_Format(PyExc_IndexError, "method index %zd out of range", index);
        return -1;
    }
    self->check = CHECK_NONE;
    set_range(self, 0, -1);
    Py_CLEAR(self->params);
    Py_CLEAR(self->reject);
    if (check != Py_None && TracedMethod_set_check(self, check) < 0) {
        return -1;
    }
    Py_INCREF(dispatcher);
    Py_XSETREF(self->dispatcher, dispatcher);
    self->index = index;
    self->vectorcall = TracedMethod_vectorcall;
    return 0;
}

static int TracedMethod_traverse(TracedMethodObject *self, visitproc visit, void *arg) {
    Py_VISIT(self->dispatcher);
    Py_VISIT(self->params);
    Py_VISIT(self->reject);
    return 0;
}

static int TracedMethod_clear(TracedMethodObject *self) {
    Py_CLEAR(self->dispatcher);
    Py_CLEAR(self->params);
    Py_CLEAR(self->reject);
    return 0;
}

static void TracedMethod_dealloc(TracedMethodObject *self) {
    PyObject_GC_UnTrack(self);
    TracedMethod_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *TracedMethod_repr(TracedMethodObject *self) {
    PyObject *name = PyTuple_GET_ITEM(self->dispatcher->slot->names, self->index);
    return PyUnicode_FromFormat("<traced method %U>", name);
}

static PyMemberDef TracedMethod_members[] = {
    {"index", T_PYSSIZET, offsetof(TracedMethodObject, index), READONLY, "method index"},
    {NULL},
};

static PyTypeObject TracedMethodType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "juggle.runtime._dispatch.TracedMethod",
    .tp_basicsize = sizeof(TracedMethodObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL |
                Py_TPFLAGS_METHOD_DESCRIPTOR,
    .tp_doc = "A proxy method: forwards to the dispatcher's current slot and traces the call.",
    .tp_descr_get = TracedMethod_descr_get,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)TracedMethod_init,
    .tp_dealloc = (destructor)TracedMethod_dealloc,
    .tp_traverse = (traverseproc)TracedMethod_traverse,
    .tp_clear = (inquiry)TracedMethod_clear,
    .tp_repr = (reprfunc)TracedMethod_repr,
    .tp_call = PyVectorcall_Call,
    .tp_vectorcall_offset = offsetof(TracedMethodObject, vectorcall),
    .tp_members = TracedMethod_members,
};

/* ---------------------------------------------------------------- module */

static PyObject *mod_now_ns(PyObject *module, PyObject *unused) {
    return PyLong_FromUnsignedLongLong(now_ns());
}

static PyObject *mod_tick_ratio(PyObject *module, PyObject *unused) {
    /* ns per tick, measured over the time since import (at least 1 ms) */
    uint64_t t, n;
    do {
        t = now_ticks();
        n = now_ns();
    } while (n - origin_ns < 1000000ull);
    if (t == origin_ticks) {
        return PyFloat_FromDouble(1.0);
    }
    return PyFloat_FromDouble((double)(n - origin_ns) / (double)(t - origin_ticks));
}

static PyObject *mod_set_error_hook(PyObject *mod, PyObject *args) {
    PyObject *passthrough, *hook;
    if (!PyArg_ParseTuple(args, "OO", &passthrough, &hook)) {
        return NULL;
    }
    if (!PyType_Check(passthrough) || !PyCallable_Check(hook)) {
        PyErr_SetString(PyExc_TypeError, "set_error_hook(exception type, callable)");
        return NULL;
    }
    Py_XSETREF(passthrough_type, Py_NewRef(passthrough));
    Py_XSETREF(error_hook, Py_NewRef(hook));
    Py_RETURN_NONE;
}

static PyMethodDef module_methods[] = {
    {"set_error_hook", mod_set_error_hook, METH_VARARGS,
     "set_error_hook(passthrough, hook): other errors of implementations go to hook"},
    {"now_ns", mod_now_ns, METH_NOARGS, "monotonic clock in ns"},
    {"tick_ratio", mod_tick_ratio, METH_NOARGS, "ns per duration tick (histograms are in ticks)"},
    {NULL},
};

static struct PyModuleDef moduledef = {
    PyModuleDef_HEAD_INIT, "juggle.runtime._dispatch",
    "Compiled call path of juggle service proxies.", -1, module_methods,
};

PyMODINIT_FUNC PyInit__dispatch(void) {
    if (PyType_Ready(&SlotType) < 0 || PyType_Ready(&DispatcherType) < 0 ||
        PyType_Ready(&TracedMethodType) < 0) {
        return NULL;
    }
    origin_ticks = now_ticks();
    origin_ns = now_ns();
    PyObject *m = PyModule_Create(&moduledef);
    if (m == NULL) {
        return NULL;
    }
    if (PyModule_AddObjectRef(m, "Slot", (PyObject *)&SlotType) < 0 ||
        PyModule_AddObjectRef(m, "Dispatcher", (PyObject *)&DispatcherType) < 0 ||
        PyModule_AddObjectRef(m, "TracedMethod", (PyObject *)&TracedMethodType) < 0 ||
        PyModule_AddIntConstant(m, "NBUCKETS", NBUCKETS) < 0 ||
        PyModule_AddIntConstant(m, "LINEAR", LINEAR) < 0 ||
        PyModule_AddIntConstant(m, "SUB_BITS", SUB_BITS) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
