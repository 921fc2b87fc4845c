// aes_top: the AES-128 core (an initial AddRoundKey and ten rounds, one per clock) behind
// juggle's register bus.
//
// Ports are those of every juggle design: clk, rst_n (synchronous, active low) and the 32-bit
// register bus (bus_addr is a byte offset; timing in common/jg_regbus.v). Register map and
// cycle behaviour: aes/aes_core.v (the map of juggle.services.crypto.aes_hw).
//
// Written for juggle; Verilog-2005.

`default_nettype none

module aes_top (
    input  wire        clk,
    input  wire        rst_n,
    input  wire [15:0] bus_addr,
    input  wire [31:0] bus_wdata,
    input  wire        bus_we,
    input  wire        bus_re,
    output wire [31:0] bus_rdata
);
    wire         reg_we;
    wire [3:0]   reg_idx;
    wire [31:0]  reg_wdata;
    wire [511:0] reg_rdata;

    jg_regbus #(.NREGS(16), .IW(4)) bus (
        .clk(clk), .rst_n(rst_n),
        .bus_addr(bus_addr), .bus_wdata(bus_wdata), .bus_we(bus_we), .bus_re(bus_re),
        .bus_rdata(bus_rdata),
        .reg_we(reg_we), .reg_idx(reg_idx), .reg_wdata(reg_wdata), .reg_rdata(reg_rdata)
    );

    aes_core core (
        .clk(clk), .rst_n(rst_n),
        .reg_we(reg_we), .reg_idx(reg_idx), .reg_wdata(reg_wdata), .reg_rdata(reg_rdata)
    );
endmodule

`default_nettype wire
