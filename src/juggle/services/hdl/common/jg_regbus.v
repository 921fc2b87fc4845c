// jg_regbus: the 32-bit register bus that wraps every juggle reference core.
//
// One slave port on the board's bus (what the driver's read32/write32 reach), turned into a
// register-file interface the core implements: a write strobe with a word index and data, and
// the core's registers as one flat vector the wrapper multiplexes for reads.
//
// Bus timing (every signal is sampled at the rising edge of clk):
//   write  bus_we=1 with bus_addr and bus_wdata during one cycle: the register takes the value
//          at that rising edge (reg_we is 1 for exactly that edge).
//   read   bus_re=1 with bus_addr during one cycle: bus_rdata is loaded at that rising edge with
//          the register as it was just before the edge, and holds until the next read.
//   A cycle with both bus_we and bus_re is a write (bus_rdata keeps its value).
//   bus_addr is a byte offset. An offset that is not 4-byte aligned, or at or past 4*NREGS,
//   is unmapped: writes to it are ignored and reads return 0.
//   rst_n is synchronous and active low; it clears bus_rdata.
//
// A bus master adds its own wait states around the strobe cycle; juggle's RTL backend puts
// them before it, so a transaction of N cycles takes effect (or samples) at its last edge.
//
// Written for juggle; Verilog-2005.

`default_nettype none

module jg_regbus #(
    parameter integer NREGS = 16,  // registers in the window (the window is 4*NREGS bytes)
    parameter integer IW = 4       // width of a register index: clog2(NREGS)
) (
    input  wire                 clk,
    input  wire                 rst_n,
    input  wire [15:0]          bus_addr,
    input  wire [31:0]          bus_wdata,
    input  wire                 bus_we,
    input  wire                 bus_re,
    output reg  [31:0]          bus_rdata,
    output wire                 reg_we,     // write strobe for register reg_idx
    output wire [IW-1:0]        reg_idx,    // word index of the addressed register
    output wire [31:0]          reg_wdata,  // value to write
    input  wire [32*NREGS-1:0]  reg_rdata   // register i is bits [32*i+31 : 32*i]
);
    wire [13:0] word = bus_addr[15:2];
    wire        mapped = (bus_addr[1:0] == 2'b00) && ({18'd0, word} < NREGS);

    // the registers as an array, so a read is a plain indexed select
    wire [31:0] regs [0:NREGS-1];
    genvar g;
    generate
        for (g = 0; g < NREGS; g = g + 1) begin : unpack
            assign regs[g] = reg_rdata[32*g +: 32];
        end
    endgenerate

    assign reg_idx = word[IW-1:0];
    assign reg_we = bus_we && mapped;
    assign reg_wdata = bus_wdata;

    always @(posedge clk) begin
        if (!rst_n) begin
            bus_rdata <= 32'd0;
        end else if (bus_re && !bus_we) begin
            bus_rdata <= mapped ? regs[reg_idx] : 32'd0;
        end
    end
endmodule

`default_nettype wire
