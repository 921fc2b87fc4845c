// gcd_top: greatest common divisor of two unsigned 32-bit numbers behind an AXI4-Lite slave in
// the control-register layout of a Vivado HLS block (`s_axi_control`), the reference core of
// juggle's AXI4-Lite bus (docs/rtl.md). The GCD is computed by a sequential binary (Stein)
// algorithm, one step per clock, so the latency depends on the operands.
//
// Ports: clk, rst_n (synchronous, active low) and the five AXI4-Lite channels of one slave
// (AW, W, B, AR, R; no AWPROT/ARPROT). Addresses are byte offsets; bits [1:0] are ignored.
//
// Register map (32-bit registers, 0x40-byte window; "COR" = clear on read):
//   0x00 AP_CTRL  bit 0 ap_start      R/W  write 1 to start; reads 1 until the core finishes
//                                          (then it takes the value of auto_restart); writing
//                                          0 does nothing
//                 bit 1 ap_done       R    COR: set when a result is written
//                 bit 2 ap_idle       R    1 while the datapath is not running
//                 bit 3 ap_ready      R    COR: set with ap_done (the operands were consumed)
//                 bit 7 auto_restart  R/W  when set, the core starts again as it finishes
//   0x04 GIE      bit 0               R/W  global interrupt enable (no interrupt port here)
//   0x08 IER      bits 1:0            R/W  enable: bit 0 done, bit 1 ready
//   0x0C ISR      bits 1:0            R/W  bit 0 done, bit 1 ready; set by the event while
//                                          enabled in IER; a write toggles the bits written 1
//   0x10 A        R/W  first operand (byte strobes honoured)
//   0x18 B        R/W  second operand (byte strobes honoured)
//   0x20 RESULT   R    gcd(A, B) of the last operation (gcd(0, 0) = 0)
//   0x24 RESULT_VLD bit 0  R  COR: set when RESULT is written
//   Every other offset reads 0 and ignores writes. Every response is OKAY.
//   Control bits (AP_CTRL, GIE, IER, ISR) are written when WSTRB[0] is set.
//   When an event sets a COR bit in the cycle a read clears it, the bit stays set (the read
//   returns the value before the edge, so the event is not lost); likewise an ISR bit set by an
//   event in the cycle a write toggles it stays set, and an ap_start written 1 in the cycle the
//   core finishes stays 1.
//
// AXI4-Lite slave (every output depends on registers only: no ready follows a valid):
//   write  AWREADY is high while no address is held and no response is pending, WREADY likewise
//          for data. AW and W may arrive in either order or together; the register is written at
//          the rising edge where the second of the two handshakes completes (or both), and BVALID
//          rises after that edge with BRESP = OKAY and stays high until BREADY. A write therefore
//          takes two cycles when AW and W come together with BREADY high: the handshake edge
//          (register written) and the response edge.
//   read   ARREADY is high while no read response is pending. At the AR handshake edge RDATA is
//          loaded with the register as it was just before that edge (the clear-on-read bits are
//          cleared at that edge) and RVALID rises, RRESP = OKAY, held until RREADY: two cycles.
//   Reset (rst_n low at a rising edge) clears every register, drops BVALID and RVALID and
//   leaves the core idle.
//
// Datapath (state idle or run; x, y 32-bit, k 5-bit), per rising edge:
//   idle, ap_start = 1   x <= A, y <= B, k <= 0; run                        (load edge)
//   run, x = 0 or y = 0  RESULT <= (x | y) << k; ap_done, ap_ready, RESULT_VLD and the enabled
//                        ISR bits set; ap_start <= auto_restart; idle       (finish edge)
//   run, x, y even       x <= x >> 1, y <= y >> 1, k <= k + 1
//   run, x even          x <= x >> 1
//   run, y even          y <= y >> 1
//   run, both odd        the larger <= (larger - smaller) >> 1 (x when x >= y)
// Each step halves x or y at least, so with n the number of steps before x or y is 0 (n <= 64),
// the finish edge is n + 1 edges after the load edge.
//
// Cycle schedule of one operation (edges numbered from the edge where the AW/W handshake writes
// ap_start = 1 to AP_CTRL, edge S):
//   edge S              ap_start <= 1 (the core is idle: AP_CTRL reads start=1, idle=1 after it)
//   edge S + 1          load: the core runs (AP_CTRL reads start=1, idle=0)
//   edges S + 2 ...     n steps
//   edge S + n + 2      finish: after it AP_CTRL reads done=1, idle=1, ready=1, start=0
// A read whose AR handshake is at edge E returns the state after edge E - 1, so it sees done
// if E >= S + n + 3. Under juggle's harness a write of W cycles puts its AW/W handshake at its
// cycle W - 1 and the B handshake at its last cycle; a read of R cycles its AR handshake at
// cycle R - 1 and the R handshake at its last (the wait states come first): the register model
// gcd_module.GcdCore counts the same edges.
//
// Written for juggle; Verilog-2005.

`default_nettype none

module gcd_top #(
    parameter integer AW = 6  // address bits: the 0x40-byte window
) (
    input  wire          clk,
    input  wire          rst_n,
    input  wire [AW-1:0] s_axi_awaddr,
    input  wire          s_axi_awvalid,
    output wire          s_axi_awready,
    input  wire [31:0]   s_axi_wdata,
    input  wire [3:0]    s_axi_wstrb,
    input  wire          s_axi_wvalid,
    output wire          s_axi_wready,
    output wire [1:0]    s_axi_bresp,
    output reg           s_axi_bvalid,
    input  wire          s_axi_bready,
    input  wire [AW-1:0] s_axi_araddr,
    input  wire          s_axi_arvalid,
    output wire          s_axi_arready,
    output reg  [31:0]   s_axi_rdata,
    output wire [1:0]    s_axi_rresp,
    output reg           s_axi_rvalid,
    input  wire          s_axi_rready
);
    localparam [1:0] OKAY = 2'b00;
    // word indices (byte offset / 4)
    localparam [3:0] R_CTRL = 4'h0, R_GIE = 4'h1, R_IER = 4'h2, R_ISR = 4'h3,
                     R_A = 4'h4, R_B = 4'h6, R_RESULT = 4'h8, R_VLD = 4'h9;

    // -- write channel: AW and W are buffered until both are in -------------------------------
    reg          aw_full, w_full;
    reg [AW-1:0] aw_addr_q;
    reg [31:0]   w_data_q;
    reg [3:0]    w_strb_q;

    assign s_axi_awready = !aw_full && !s_axi_bvalid;
    assign s_axi_wready = !w_full && !s_axi_bvalid;
    assign s_axi_bresp = OKAY;

    wire          aw_hs = s_axi_awvalid && s_axi_awready;
    wire          w_hs = s_axi_wvalid && s_axi_wready;
    wire          wr_en = (aw_full || aw_hs) && (w_full || w_hs);  // the register write edge
    wire [AW-1:0] wr_addr = aw_full ? aw_addr_q : s_axi_awaddr;
    wire [31:0]   wr_data = w_full ? w_data_q : s_axi_wdata;
    wire [3:0]    wr_strb = w_full ? w_strb_q : s_axi_wstrb;
    wire [AW-3:0] wr_word = wr_addr[AW-1:2];
    wire          wr_ctl = wr_en && wr_strb[0];  // control bits live in byte 0

    always @(posedge clk) begin
        if (!rst_n) begin
            aw_full <= 1'b0;
            w_full <= 1'b0;
            aw_addr_q <= {AW{1'b0}};
            w_data_q <= 32'd0;
            w_strb_q <= 4'd0;
            s_axi_bvalid <= 1'b0;
        end else begin
            if (wr_en) begin
                aw_full <= 1'b0;
                w_full <= 1'b0;
                s_axi_bvalid <= 1'b1;
            end else begin
                if (aw_hs) begin
                    aw_full <= 1'b1;
                    aw_addr_q <= s_axi_awaddr;
                end
                if (w_hs) begin
                    w_full <= 1'b1;
                    w_data_q <= s_axi_wdata;
                    w_strb_q <= s_axi_wstrb;
                end
                if (s_axi_bvalid && s_axi_bready) s_axi_bvalid <= 1'b0;
            end
        end
    end

    // -- read channel --------------------------------------------------------------------------
    assign s_axi_arready = !s_axi_rvalid;
    assign s_axi_rresp = OKAY;
    wire          ar_hs = s_axi_arvalid && s_axi_arready;
    wire [AW-3:0] rd_word = s_axi_araddr[AW-1:2];
    wire          unused_low_bits = ^{s_axi_araddr[1:0], wr_addr[1:0]};  // offsets are words

    // -- registers -----------------------------------------------------------------------------
    reg        ap_start, ap_done, ap_ready, auto_restart, gie;
    reg [1:0]  ier, isr;
    reg [31:0] a, b, result;
    reg        result_vld;
    // datapath
    reg        running;
    reg [31:0] x, y;
    reg [4:0]  k;
    wire       finish = running && (x == 32'd0 || y == 32'd0);
    wire       ap_idle = !running;

    wire [31:0] ctrl_value = {24'd0, auto_restart, 3'd0, ap_ready, ap_idle, ap_done, ap_start};

    function [31:0] merge;  // a register written under byte strobes
        input [31:0] old;
        input [31:0] data;
        input [3:0]  strb;
        integer i;
        begin
            for (i = 0; i < 4; i = i + 1)
                merge[8*i +: 8] = strb[i] ? data[8*i +: 8] : old[8*i +: 8];
        end
    endfunction

    always @(posedge clk) begin
        if (!rst_n) begin
            s_axi_rvalid <= 1'b0;
            s_axi_rdata <= 32'd0;
        end else if (ar_hs) begin
            s_axi_rvalid <= 1'b1;
            case (rd_word)
                R_CTRL: s_axi_rdata <= ctrl_value;
                R_GIE: s_axi_rdata <= {31'd0, gie};
                R_IER: s_axi_rdata <= {30'd0, ier};
                R_ISR: s_axi_rdata <= {30'd0, isr};
                R_A: s_axi_rdata <= a;
                R_B: s_axi_rdata <= b;
                R_RESULT: s_axi_rdata <= result;
                R_VLD: s_axi_rdata <= {31'd0, result_vld};
                default: s_axi_rdata <= 32'd0;
            endcase
        end else if (s_axi_rvalid && s_axi_rready) begin
            s_axi_rvalid <= 1'b0;
        end
    end

    wire rd_ctrl = ar_hs && rd_word == R_CTRL;
    wire rd_vld = ar_hs && rd_word == R_VLD;

    always @(posedge clk) begin
        if (!rst_n) begin
            ap_start <= 1'b0;
            ap_done <= 1'b0;
            ap_ready <= 1'b0;
            auto_restart <= 1'b0;
            gie <= 1'b0;
            ier <= 2'd0;
            isr <= 2'd0;
            a <= 32'd0;
            b <= 32'd0;
            result <= 32'd0;
            result_vld <= 1'b0;
            running <= 1'b0;
            x <= 32'd0;
            y <= 32'd0;
            k <= 5'd0;
        end else begin
            // AP_CTRL
            if (wr_ctl && wr_word == R_CTRL && wr_data[0]) ap_start <= 1'b1;
            else if (finish) ap_start <= auto_restart;
            if (wr_ctl && wr_word == R_CTRL) auto_restart <= wr_data[7];
            if (finish) ap_done <= 1'b1;
            else if (rd_ctrl) ap_done <= 1'b0;
            if (finish) ap_ready <= 1'b1;
            else if (rd_ctrl) ap_ready <= 1'b0;
            // interrupt registers
            if (wr_ctl && wr_word == R_GIE) gie <= wr_data[0];
            if (wr_ctl && wr_word == R_IER) ier <= wr_data[1:0];
            if (finish && ier[0]) isr[0] <= 1'b1;
            else if (wr_ctl && wr_word == R_ISR) isr[0] <= isr[0] ^ wr_data[0];
            if (finish && ier[1]) isr[1] <= 1'b1;
            else if (wr_ctl && wr_word == R_ISR) isr[1] <= isr[1] ^ wr_data[1];
            // operands
            if (wr_en && wr_word == R_A) a <= merge(a, wr_data, wr_strb);
            if (wr_en && wr_word == R_B) b <= merge(b, wr_data, wr_strb);
            // result
            if (finish) begin
                result <= (x | y) << k;
                result_vld <= 1'b1;
            end else if (rd_vld) begin
                result_vld <= 1'b0;
            end
            // datapath: one Stein step per edge
            if (!running) begin
                if (ap_start) begin
                    x <= a;
                    y <= b;
                    k <= 5'd0;
                    running <= 1'b1;
                end
            end else if (finish) begin
                running <= 1'b0;
            end else if (!x[0] && !y[0]) begin
                x <= x >> 1;
                y <= y >> 1;
                k <= k + 5'd1;
            end else if (!x[0]) begin
                x <= x >> 1;
            end else if (!y[0]) begin
                y <= y >> 1;
            end else if (x >= y) begin
                x <= (x - y) >> 1;
            end else begin
                y <= (y - x) >> 1;
            end
        end
    end
endmodule

`default_nettype wire
