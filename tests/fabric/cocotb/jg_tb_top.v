// jg_tb_top: a clock for a juggle design under Icarus Verilog, which runs the testbenches'
// clock far faster in HDL than as a cocotb Clock. No logic: the design `JG_TOP (a macro: the
// top module's name, given with -DJG_TOP=...) with each bus port wired to a signal of the
// same name here, which the cocotb testbench drives and samples as it would the top's ports.
// The clock starts low, rises at time 2 and has a period of 4 time units (simulator steps),
// as the testbenches' Clock(clk, 4, unit="step").start(start_high=False) under Verilator.
//
// Written for juggle; Verilog-2005.

`default_nettype none

module jg_tb_top;
    reg         clk = 1'b0;
    reg         rst_n = 1'b0;
    reg  [15:0] bus_addr = 16'd0;
    reg  [31:0] bus_wdata = 32'd0;
    reg         bus_we = 1'b0;
    reg         bus_re = 1'b0;
    wire [31:0] bus_rdata;

    always #2 clk = ~clk;

    `JG_TOP dut (
        .clk(clk), .rst_n(rst_n),
        .bus_addr(bus_addr), .bus_wdata(bus_wdata), .bus_we(bus_we), .bus_re(bus_re),
        .bus_rdata(bus_rdata)
    );
endmodule

`default_nettype wire
