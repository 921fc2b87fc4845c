// rtlxor_top: the test core of tests/runtime/test_rtl_modules.py, on juggle's register bus.
//
// It implements the register map of the module `juggle module new rtlxor rtlt.XorService`
// writes (data XOR a 32-bit mask; see the generated rtlxor_module.py):
//   0x00 MASK R/W, 0x04 STATUS R (bit 0 BUSY; this core is never busy: a word is done at the
//   edge that writes it), 0x08 DATA_IN W, 0x0C DATA_OUT R, 0x38 LATENCY R (1),
//   0x3C ID R ("RTLX"); other offsets read 0.
// Bus timing as common/jg_regbus.v: a write takes effect at the edge of its bus_we cycle, a
// read loads bus_rdata at the edge of its bus_re cycle. rst_n is synchronous, active low.
//
// The tests derive a broken copy by editing the line marked DATAPATH.
//
// Written for juggle's tests; Verilog-2005.

`default_nettype none

module rtlxor_top (
    input  wire        clk,
    input  wire        rst_n,
    input  wire [15:0] bus_addr,
    input  wire [31:0] bus_wdata,
    input  wire        bus_we,
    input  wire        bus_re,
    output reg  [31:0] bus_rdata
);
    reg  [31:0] mask;
    reg  [31:0] result;
    wire        mapped = (bus_addr[1:0] == 2'b00) && (bus_addr[15:6] == 10'd0);
    wire [3:0]  idx = bus_addr[5:2];

    always @(posedge clk) begin
        if (!rst_n) begin
            mask <= 32'd0;
            result <= 32'd0;
            bus_rdata <= 32'd0;
        end else if (bus_we) begin
            if (mapped && idx == 4'h0) begin
                mask <= bus_wdata;
            end
            if (mapped && idx == 4'h2) begin
                result <= bus_wdata ^ mask;  // DATAPATH
            end
        end else if (bus_re) begin
            if (!mapped) begin
                bus_rdata <= 32'd0;
            end else begin
                case (idx)
                    4'h0: bus_rdata <= mask;
                    4'h3: bus_rdata <= result;
                    4'hE: bus_rdata <= 32'd1;
                    4'hF: bus_rdata <= 32'h52544C58;
                    default: bus_rdata <= 32'd0;
                endcase
            end
        end
    end
endmodule

`default_nettype wire
