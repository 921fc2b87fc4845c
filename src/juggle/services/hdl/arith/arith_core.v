// arith_core: the adder and multiplier cores of Juggle Listing 3 / Table 2, with the register
// map of juggle's AdderDriver/MultiplierDriver (juggle.services.arith).
//
// Word index (byte offset)   name        access
//   0 (0x00)   CONTROL    R/W  bit 0 START: latch OPERAND_A/OPERAND_B and compute; reads back
//   1 (0x04)   STATUS     R    bit 0 BUSY, bit 1 DONE (an operation was started and finished)
//   2 (0x08)   OPERAND_A  R/W  first operand, two's complement
//   3 (0x0C)   OPERAND_B  R/W  second operand
//   4 (0x10)   RESULT     R    low 32 bits of the sum / product
//  14 (0x38)   LATENCY    R    cycles per operation: 1 (adder), 4 (multiplier)
//  15 (0x3C)   ID         R    "ADD1" or "MUL1"
//   others                R    0
//
// Timing: the rising edge that writes CONTROL with START while the core is idle is the first
// cycle of the operation. The adder finishes in that cycle; the multiplier forms the 32x32
// product from four 16x16 partial products on one multiplier (one 18x18 block on a Virtex-II
// Pro), one per cycle, and finishes at the fourth edge. So a START written at edge t is DONE
// for reads sampled at edge t+LATENCY and later, as in the Python models (AdderCore,
// MultiplierCore); until then RESULT keeps the previous result. A START while BUSY is
// ignored (CONTROL still takes the value); operand writes are taken at any time and do not
// disturb a running operation. The low 32 bits of a product do not depend on the operands'
// signs, so the partial products are unsigned.
//
// Written for juggle; Verilog-2005.

`default_nettype none

module arith_core #(
    parameter integer MULTIPLY = 0   // 0: adder (1 cycle); 1: multiplier (4 cycles)
) (
    input  wire          clk,
    input  wire          rst_n,
    input  wire          reg_we,
    input  wire [3:0]    reg_idx,
    input  wire [31:0]   reg_wdata,
    output wire [511:0]  reg_rdata
);
    localparam [31:0] LATENCY = (MULTIPLY != 0) ? 32'd4 : 32'd1;
    localparam [31:0] CORE_ID = (MULTIPLY != 0) ? 32'h4D554C31 : 32'h41444431;

    reg [31:0] control;
    reg [31:0] operand_a;
    reg [31:0] operand_b;
    reg [31:0] result;
    reg        busy;
    reg        has_result;

    wire start = reg_we && (reg_idx == 4'd0) && reg_wdata[0] && !busy;

    always @(posedge clk) begin
        if (!rst_n) begin
            control <= 32'd0;
            operand_a <= 32'd0;
            operand_b <= 32'd0;
        end else if (reg_we) begin
            case (reg_idx)
                4'd0: control <= reg_wdata;
                4'd2: operand_a <= reg_wdata;
                4'd3: operand_b <= reg_wdata;
                default: ;
            endcase
        end
    end

    generate
        if (MULTIPLY != 0) begin : mul
            // partial product k (k = 0..3, one per cycle) of the halves (a_hi|a_lo)*(b_hi|b_lo):
            //   0: a_lo*b_lo  1: a_hi*b_lo << 16  2: a_lo*b_hi << 16  3: a_hi*b_hi << 32
            // summed modulo 2**32 (the result register's width): product 3 lies wholly above
            // bit 31, so its cycle adds 0; the core keeps the four-cycle schedule regardless.
            reg  [31:0] a;          // operands latched at START
            reg  [31:0] b;
            reg  [31:0] acc;        // sum of the partial products so far, modulo 2**32
            reg  [1:0]  k;          // partial product formed at the last edge
            wire [1:0]  k_next = start ? 2'd0 : k + 2'd1;
            wire [31:0] a_now = start ? operand_a : a;
            wire [31:0] b_now = start ? operand_b : b;
            wire [15:0] x = k_next[0] ? a_now[31:16] : a_now[15:0];
            wire [15:0] y = k_next[1] ? b_now[31:16] : b_now[15:0];
            wire [31:0] pp = x * y;
            wire [31:0] term = (k_next == 2'd0) ? pp
                             : (k_next == 2'd3) ? 32'd0
                             : {pp[15:0], 16'd0};
            wire [31:0] acc_next = (start ? 32'd0 : acc) + term;

            always @(posedge clk) begin
                if (!rst_n) begin
                    a <= 32'd0;
                    b <= 32'd0;
                    acc <= 32'd0;
                    k <= 2'd0;
                    result <= 32'd0;
                    busy <= 1'b0;
                    has_result <= 1'b0;
                end else if (start || busy) begin
                    if (start) begin
                        a <= operand_a;
                        b <= operand_b;
                        has_result <= 1'b1;
                    end
                    acc <= acc_next;
                    k <= k_next;
                    if (k_next == 2'd3) begin
                        busy <= 1'b0;
                        result <= acc_next;
                    end else begin
                        busy <= 1'b1;
                    end
                end
            end
        end else begin : add
            always @(posedge clk) begin
                if (!rst_n) begin
                    result <= 32'd0;
                    busy <= 1'b0;
                    has_result <= 1'b0;
                end else if (start) begin
                    result <= operand_a + operand_b;  // done in the START cycle
                    has_result <= 1'b1;
                end
            end
        end
    endgenerate

    wire [31:0] status = busy ? 32'd1 : (has_result ? 32'd2 : 32'd0);

    assign reg_rdata = {CORE_ID, LATENCY, {9{32'd0}},          // 15, 14, 13..5
                        result, operand_b, operand_a, status, control};  // 4 .. 0
endmodule

`default_nettype wire
