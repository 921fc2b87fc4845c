// juggle RTL harness: runs one Verilated design (class Vjg_dut, built with --prefix Vjg_dut)
// and performs register-bus transactions asked for on stdin, one line each, answering on
// stdout, one line each.
//
//   usage: sim READ_CYCLES WRITE_CYCLES
//
// At start the design is held in reset (rst_n = 0) for RESET_CYCLES clock cycles, released,
// and the harness prints "ready 1 <top>" (1 is the protocol version). Cycles are counted from
// the release of reset. Requests (hexadecimal operands) and replies:
//
//   r ADDR          read  -> "DATA CYCLES"   (DATA as 8 hex digits, CYCLES decimal)
//   w ADDR DATA     write -> "CYCLES"
//   c               total -> "CYCLES"        (clock cycles since reset was released)
//   q               exit 0 without a reply (so does end of input)
//
// A read transaction is READ_CYCLES clock cycles: READ_CYCLES - 1 wait cycles with the bus
// idle, then one cycle with bus_re = 1 whose rising edge loads bus_rdata; DATA is bus_rdata
// after that edge. A write is WRITE_CYCLES cycles the same way, the last with bus_we = 1.
// Either is at least one cycle. CYCLES in a reply is the number of clock cycles the
// transaction took. A malformed request prints "error ..." on stderr and exits with status 2.
//
// Written for juggle.

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

constexpr int kProtocol = 1;
constexpr int kResetCycles = 4;

class Bench {
  public:
    explicit Bench(VerilatedContext* ctx) : dut_(new Vjg_dut{ctx}) {
        dut_->clk = 0;
        dut_->rst_n = 0;
        idle();
        for (int i = 0; i < kResetCycles; ++i) tick();
        dut_->rst_n = 1;
        cycles_ = 0;
    }
    ~Bench() { dut_->final(); }

    uint32_t read(uint32_t addr, unsigned wait) {
        idle();
        for (unsigned i = 0; i < wait; ++i) tick();
        dut_->bus_addr = static_cast<uint16_t>(addr);
        dut_->bus_re = 1;
        tick();
        const uint32_t data = dut_->bus_rdata;
        idle();
        return data;
    }

    void write(uint32_t addr, uint32_t data, unsigned wait) {
        idle();
        for (unsigned i = 0; i < wait; ++i) tick();
        dut_->bus_addr = static_cast<uint16_t>(addr);
        dut_->bus_wdata = data;
        dut_->bus_we = 1;
        tick();
        idle();
    }

    uint64_t cycles() const { return cycles_; }

  private:
    void idle() {
        dut_->bus_we = 0;
        dut_->bus_re = 0;
        dut_->bus_addr = 0;
        dut_->bus_wdata = 0;
    }

    // one clock cycle: inputs settle while clk is low, then the rising edge
    void tick() {
        dut_->clk = 0;
        dut_->eval();
        dut_->clk = 1;
        dut_->eval();
        ++cycles_;
    }

    std::unique_ptr<Vjg_dut> dut_;
    uint64_t cycles_ = 0;
};

bool parse_hex(const char* text, char** end, uint32_t* out) {
    if (*text != ' ') return false;
    ++text;
    const unsigned long value = std::strtoul(text, end, 16);
    if (*end == text || value > 0xFFFFFFFFUL) return false;
    *out = static_cast<uint32_t>(value);
    return true;
}

[[noreturn]] void fail(const char* what, const char* line) {
    std::fprintf(stderr, "error: %s: %s\n", what, line);
    std::exit(2);
}

}  // namespace

int main(int argc, char** argv) {
    if (argc != 3) {
        std::fprintf(stderr, "usage: %s READ_CYCLES WRITE_CYCLES\n", argv[0]);
        return 2;
    }
    const long read_cycles = std::strtol(argv[1], nullptr, 10);
    const long write_cycles = std::strtol(argv[2], nullptr, 10);
    const unsigned read_wait = read_cycles > 1 ? static_cast<unsigned>(read_cycles - 1) : 0;
    const unsigned write_wait = write_cycles > 1 ? static_cast<unsigned>(write_cycles - 1) : 0;

    auto ctx = std::make_unique<VerilatedContext>();
    Bench bench(ctx.get());
    std::printf("ready %d %s\n", kProtocol, JG_TOP_NAME);
    std::fflush(stdout);

    char line[128];
    while (std::fgets(line, sizeof line, stdin) != nullptr) {
        char* end = nullptr;
        line[std::strcspn(line, "\n")] = '\0';
        uint32_t addr = 0;
        uint32_t data = 0;
        switch (line[0]) {
            case 'r': {
                if (!parse_hex(line + 1, &end, &addr) || *end != '\0') fail("bad read", line);
                const uint64_t before = bench.cycles();
                data = bench.read(addr, read_wait);
                std::printf("%08x %llu\n", data,
                            static_cast<unsigned long long>(bench.cycles() - before));
                break;
            }
            case 'w': {
                if (!parse_hex(line + 1, &end, &addr) || !parse_hex(end, &end, &data) ||
                    *end != '\0')
                    fail("bad write", line);
                const uint64_t before = bench.cycles();
                bench.write(addr, data, write_wait);
                std::printf("%llu\n", static_cast<unsigned long long>(bench.cycles() - before));
                break;
            }
            case 'c':
                std::printf("%llu\n", static_cast<unsigned long long>(bench.cycles()));
                break;
            case 'q':
                return 0;
            default:
                fail("unknown request", line);
        }
        std::fflush(stdout);
    }
    return 0;
}
