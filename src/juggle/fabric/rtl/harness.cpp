// juggle RTL harness: runs one Verilated design (class Vjg_dut, built with --prefix Vjg_dut)
// and performs the bus transactions juggle's runtime posts in a shared mapping.
//
//   usage: sim READ_CYCLES WRITE_CYCLES HANDSHAKE_CYCLES SHM_FD
//
// Built for one bus: juggle's register bus (default) or AXI4-Lite (-DJG_BUS_AXI=1, with
// -DJG_AXI_AW=<address width>). At start the design is held in reset (rst_n = 0, every bus
// input low) for RESET_CYCLES clock cycles, released, and the harness prints
// "ready 2 <top>" on stdout (2 is the protocol version). Cycles are counted from the release
// of reset. Every signal is sampled at the rising edge of clk; the harness changes inputs only
// while clk is low.
//
// Register bus: a read is READ_CYCLES clock cycles: READ_CYCLES - 1 idle cycles, then one
// cycle with bus_re = 1 whose rising edge loads bus_rdata; DATA is bus_rdata after that edge.
// A write is WRITE_CYCLES cycles the same way, the last with bus_we = 1. Either is at least
// one cycle and always answers OKAY.
//
// AXI4-Lite: a read idles READ_CYCLES - 2 cycles (none if fewer), then raises ARVALID with
// ARADDR until a rising edge sees ARREADY, then RREADY until one sees RVALID; DATA and the
// status are RDATA and RRESP of that edge. A write idles WRITE_CYCLES - 2 cycles, raises
// AWVALID (AWADDR) and WVALID (WDATA, WSTRB = 0xF) together and drops each after its own
// handshake, then raises BREADY until an edge sees BVALID; the status is BRESP. So a slave
// that answers at once takes READ_CYCLES (WRITE_CYCLES) cycles, at least 2. Each of these
// waits may last HANDSHAKE_CYCLES cycles; one that lasts longer ends the transaction with the
// status naming the missing signal (the core hangs).
//
// Shared memory (SHM_FD, a file of at least 256 bytes): two slots of three 64-bit words each,
// the request at byte 0 (written by the runtime), the reply at byte 64 (written here):
//
//   request  [SEQ<<32 | OP]  [SEQ<<32 | ADDR]  [SEQ<<32 | DATA]      OP: 1 read, 2 write, 3 quit
//   reply    [SEQ<<32 | STATUS]  [SEQ<<32 | DATA]  [SEQ<<32 | CYCLES]
//
// SEQ counts 1, 2, ... 2^32-1, 1, ...; a slot is whole when all its words carry the expected
// SEQ, so neither side depends on the order in which the other's stores become visible, only
// on each aligned 64-bit word being stored and loaded whole. The words are read with acquire
// loads; the reply's first word is stored last (sequentially consistent, as the doorbell word
// after it is loaded). STATUS: 0 OKAY, 1 EXOKAY,
// 2 SLVERR, 3 DECERR, 4..8 no AWREADY, WREADY, BVALID, ARREADY, RVALID within the limit.
// CYCLES is the number of clock cycles the transaction took.
//
// Waiting for a request the harness spins (with a CPU pause, yielding the CPU every 64 polls)
// for SPIN_NS after the last one; then it stores the SEQ it waits for at byte 128, looks at
// the request once more, and blocks on stdin (at most DOZE_NS at a time): the runtime writes a
// byte there (rings) when it posts a request and finds that SEQ. The runtime, waiting long for
// a reply, stores the SEQ at byte 192 and blocks on stdout; after every reply the harness
// rings there (writes one byte) when it finds that SEQ. End of input (the runtime closed it,
// or died) ends the harness, as does OP 3. A malformed request or argument prints
// "error ..." on stderr and exits with status 2.
//
// Written for juggle.

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "Vjg_dut.h"
#include "verilated.h"

#ifndef JG_TOP_NAME
#define JG_TOP_NAME "unknown"
#endif

namespace {

constexpr int kProtocol = 2;
constexpr int kResetCycles = 4;
constexpr size_t kShmSize = 256;
constexpr int64_t kSpinNs = 100000;   // spin this long after a request
constexpr int64_t kDozeNs = 5000000;  // then block on the doorbell this long at a time

enum Status : uint32_t {
    kOkay = 0,
    kNoAwready = 4,
    kNoWready = 5,
    kNoBvalid = 6,
    kNoArready = 7,
    kNoRvalid = 8,
};

struct Reply {
    uint32_t status;
    uint32_t data;
    uint64_t cycles;
};

class Bench {
  public:
    Bench(VerilatedContext* ctx, unsigned read_cycles, unsigned write_cycles, unsigned limit)
        : dut_(new Vjg_dut{ctx}),
          read_cycles_(read_cycles),
          write_cycles_(write_cycles),
          limit_(limit) {
        dut_->clk = 0;
        dut_->rst_n = 0;
        idle();
        for (int i = 0; i < kResetCycles; ++i) tick();
        dut_->rst_n = 1;
        cycles_ = 0;
    }
    ~Bench() { dut_->final(); }

#if JG_BUS_AXI
    Reply read(uint32_t addr) {
        const uint64_t before = cycles_;
        wait(read_cycles_);
        dut_->s_axi_araddr = addr & kAddrMask;
        dut_->s_axi_arvalid = 1;
        bool done = false;
        for (unsigned n = 1; !done; ++n) {
            low();
            done = dut_->s_axi_arready;
            high();
            if (!done && n >= limit_) return hang(kNoArready, before);
        }
        dut_->s_axi_arvalid = 0;
        dut_->s_axi_araddr = 0;
        dut_->s_axi_rready = 1;
        Reply reply{kOkay, 0, 0};
        done = false;
        for (unsigned n = 1; !done; ++n) {
            low();
            done = dut_->s_axi_rvalid;
            reply.data = dut_->s_axi_rdata;
            reply.status = dut_->s_axi_rresp & 3u;
            high();
            if (!done && n >= limit_) return hang(kNoRvalid, before);
        }
        dut_->s_axi_rready = 0;
        reply.cycles = cycles_ - before;
        return reply;
    }

    Reply write(uint32_t addr, uint32_t data) {
        const uint64_t before = cycles_;
        wait(write_cycles_);
        dut_->s_axi_awaddr = addr & kAddrMask;
        dut_->s_axi_awvalid = 1;
        dut_->s_axi_wdata = data;
        dut_->s_axi_wstrb = 0xF;
        dut_->s_axi_wvalid = 1;
        for (unsigned n = 1; dut_->s_axi_awvalid || dut_->s_axi_wvalid; ++n) {
            low();
            const bool aw = dut_->s_axi_awvalid && dut_->s_axi_awready;
            const bool w = dut_->s_axi_wvalid && dut_->s_axi_wready;
            high();
            if (aw) {
                dut_->s_axi_awvalid = 0;
                dut_->s_axi_awaddr = 0;
            }
            if (w) {
                dut_->s_axi_wvalid = 0;
                dut_->s_axi_wdata = 0;
                dut_->s_axi_wstrb = 0;
            }
            if ((dut_->s_axi_awvalid || dut_->s_axi_wvalid) && n >= limit_)
                return hang(dut_->s_axi_awvalid ? kNoAwready : kNoWready, before);
        }
        dut_->s_axi_bready = 1;
        Reply reply{kOkay, 0, 0};
        bool done = false;
        for (unsigned n = 1; !done; ++n) {
            low();
            done = dut_->s_axi_bvalid;
            reply.status = dut_->s_axi_bresp & 3u;
            high();
            if (!done && n >= limit_) return hang(kNoBvalid, before);
        }
        dut_->s_axi_bready = 0;
        reply.cycles = cycles_ - before;
        return reply;
    }
#else
    Reply read(uint32_t addr) {
        const uint64_t before = cycles_;
        idle();
        for (unsigned i = 1; i < read_cycles_; ++i) tick();
        dut_->bus_addr = static_cast<uint16_t>(addr);
        dut_->bus_re = 1;
        tick();
        const uint32_t data = dut_->bus_rdata;
        idle();
        return {kOkay, data, cycles_ - before};
    }

    Reply write(uint32_t addr, uint32_t data) {
        const uint64_t before = cycles_;
        idle();
        for (unsigned i = 1; i < write_cycles_; ++i) tick();
        dut_->bus_addr = static_cast<uint16_t>(addr);
        dut_->bus_wdata = data;
        dut_->bus_we = 1;
        tick();
        idle();
        return {kOkay, 0, cycles_ - before};
    }
#endif

  private:
#if JG_BUS_AXI
    static constexpr uint32_t kAddrMask = (1u << JG_AXI_AW) - 1u;

    void idle() {
        dut_->s_axi_awaddr = 0;
        dut_->s_axi_awvalid = 0;
        dut_->s_axi_wdata = 0;
        dut_->s_axi_wstrb = 0;
        dut_->s_axi_wvalid = 0;
        dut_->s_axi_bready = 0;
        dut_->s_axi_araddr = 0;
        dut_->s_axi_arvalid = 0;
        dut_->s_axi_rready = 0;
    }

    // the idle cycles before a transaction whose quickest handshakes take 2 cycles
    void wait(unsigned cycles) {
        for (unsigned i = 2; i < cycles; ++i) tick();
    }

    Reply hang(uint32_t status, uint64_t before) {
        idle();
        return {status, 0, cycles_ - before};
    }
#else
    void idle() {
        dut_->bus_we = 0;
        dut_->bus_re = 0;
        dut_->bus_addr = 0;
        dut_->bus_wdata = 0;
    }
#endif

    // one clock cycle: inputs settle while clk is low, then the rising edge
    void low() {
        dut_->clk = 0;
        dut_->eval();
    }
    void high() {
        dut_->clk = 1;
        dut_->eval();
        ++cycles_;
    }
    void tick() {
        low();
        high();
    }

    std::unique_ptr<Vjg_dut> dut_;
    const unsigned read_cycles_;
    const unsigned write_cycles_;
    const unsigned limit_;
    uint64_t cycles_ = 0;
};

[[noreturn]] void fail(const char* what, unsigned long long detail) {
    std::fprintf(stderr, "error: %s (%llu)\n", what, detail);
    std::exit(2);
}

unsigned argument(const char* text, const char* what, unsigned long low, unsigned long high) {
    char* end = nullptr;
    errno = 0;
    const unsigned long value = std::strtoul(text, &end, 10);
    if (end == text || *end != '\0' || errno != 0 || value < low || value > high)
        fail(what, value);
    return static_cast<unsigned>(value);
}

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__) || defined(__arm__)
    asm volatile("yield" ::: "memory");
#endif
}

int64_t now_ns() {
    timespec ts{};
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

// block up to ns nanoseconds or until the doorbell on stdin rings; false on end of input
bool doze(int64_t ns) {
    pollfd pfd{STDIN_FILENO, POLLIN, 0};
    const timespec ts{ns / 1000000000, static_cast<long>(ns % 1000000000)};
    if (ppoll(&pfd, 1, &ts, nullptr) <= 0) return true;
    if (pfd.revents & (POLLERR | POLLNVAL)) return false;
    if (pfd.revents & POLLIN) {
        char rings[64];
        return read(STDIN_FILENO, rings, sizeof rings) > 0;  // 0: end of input
    }
    return (pfd.revents & POLLHUP) == 0;
}

// the shared slots: words 0-2 the request, words 8-10 the reply; word 16 the SEQ the harness
// dozes waiting for, word 24 the SEQ the runtime dozes waiting for
class Slots {
  public:
    explicit Slots(void* base) : words_(static_cast<std::atomic<uint64_t>*>(base)) {}

    // the request tagged seq (all three words), waiting as described at the top
    void next(uint32_t seq, uint64_t* out) {
        int64_t last = now_ns();
        for (unsigned spins = 1;; ++spins) {
            if (whole(seq, out)) return;
            if (spins % 64 != 0) {
                cpu_relax();
                continue;
            }
            if (now_ns() - last < kSpinNs) {
                sched_yield();  // a runtime or simulator waiting for this CPU gets it
                continue;
            }
            words_[16].store(seq, std::memory_order_seq_cst);
            if (whole(seq, out)) return;
            if (!doze(kDozeNs)) std::exit(0);
        }
    }

    void reply(uint32_t seq, const Reply& r) {
        const uint64_t tag = static_cast<uint64_t>(seq) << 32;
        if (r.cycles > 0xFFFFFFFFull) fail("transaction too long", r.cycles);
        words_[9].store(tag | r.data, std::memory_order_relaxed);
        words_[10].store(tag | r.cycles, std::memory_order_relaxed);
        words_[8].store(tag | r.status, std::memory_order_seq_cst);
        if (words_[24].load(std::memory_order_seq_cst) == seq) {
            const char ring = '!';
            if (write(STDOUT_FILENO, &ring, 1) < 0 && errno != EAGAIN) std::exit(0);  // gone
        }
    }

  private:
    bool whole(uint32_t seq, uint64_t* out) {
        for (int i = 0; i < 3; ++i) {
            out[i] = words_[i].load(std::memory_order_acquire);
            if (out[i] >> 32 != seq) return false;
        }
        return true;
    }

    std::atomic<uint64_t>* words_;
};

static_assert(sizeof(std::atomic<uint64_t>) == 8, "a shared word is 8 bytes");
static_assert(std::atomic<uint64_t>::is_always_lock_free, "shared words need lock-free atomics");

}  // namespace

int main(int argc, char** argv) {
    if (argc != 5) {
        std::fprintf(stderr, "usage: %s READ_CYCLES WRITE_CYCLES HANDSHAKE_CYCLES SHM_FD\n",
                     argv[0]);
        return 2;
    }
    const unsigned read_cycles = argument(argv[1], "bad READ_CYCLES", 1, 1000000);
    const unsigned write_cycles = argument(argv[2], "bad WRITE_CYCLES", 1, 1000000);
    const unsigned limit = argument(argv[3], "bad HANDSHAKE_CYCLES", 1, 1000000);
    const int fd = static_cast<int>(argument(argv[4], "bad SHM_FD", 0, 1 << 20));
    void* shared = mmap(nullptr, kShmSize, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (shared == MAP_FAILED) fail("cannot map SHM_FD", static_cast<unsigned long long>(errno));
    close(fd);
    Slots slots(shared);

    auto ctx = std::make_unique<VerilatedContext>();
    Bench bench(ctx.get(), read_cycles, write_cycles, limit);
    std::printf("ready %d %s\n", kProtocol, JG_TOP_NAME);
    std::fflush(stdout);
    // from now on stdout carries only doorbell rings: never block on one (a full pipe holds
    // enough of them to wake the runtime)
    fcntl(STDOUT_FILENO, F_SETFL, fcntl(STDOUT_FILENO, F_GETFL) | O_NONBLOCK);

    uint64_t request[3];
    for (uint32_t seq = 1;; seq = seq == 0xFFFFFFFFu ? 1 : seq + 1) {
        slots.next(seq, request);
        const uint32_t op = static_cast<uint32_t>(request[0]);
        const uint32_t addr = static_cast<uint32_t>(request[1]);
        const uint32_t data = static_cast<uint32_t>(request[2]);
        switch (op) {
            case 1:
                slots.reply(seq, bench.read(addr));
                break;
            case 2:
                slots.reply(seq, bench.write(addr, data));
                break;
            case 3:
                return 0;
            default:
                fail("unknown request", op);
        }
    }
}
