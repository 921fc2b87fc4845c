// axi_regs: a small AXI4-Lite slave for juggle's tests of the rtl backend's AXI4-Lite harness.
//
// Registers (byte offsets in a 64-byte window, AW = 6):
//   0x00..0x0C  four read/write registers, written byte by byte under WSTRB
//   0x10        ID, read-only (0xA11E0001); writes are ignored with OKAY
//   0x14        LOCKED: a write answers SLVERR (and changes nothing); reads 0 with OKAY
//   0x18        HOLE: reads and writes answer DECERR (reads 0)
//   0x1C        SLOW: reads 0x5105_5105 with RVALID three cycles later than anywhere else
//   0x20        STRB: the WSTRB of the last write, read-only
//   others      read 0 with OKAY, writes ignored with OKAY
//
// Timing: AWREADY/WREADY/ARREADY are high while the slave can take a request. A read answers
// RVALID at the edge after the AR handshake (SLOW: three edges later); a write takes AW and W
// at one edge and answers BVALID at the next. Parameters make a broken slave: NO_BVALID never
// raises BVALID, NO_ARREADY never raises ARREADY (top axi_regs_stuck_top has both).
// rst_n (synchronous, active low) clears every register and drops every valid.
//
// Written for juggle's tests; Verilog-2005.

`default_nettype none

module axi_regs #(
    parameter integer NO_BVALID = 0,
    parameter integer NO_ARREADY = 0
) (
    input  wire        clk,
    input  wire        rst_n,
    input  wire [5:0]  s_axi_awaddr,
    input  wire        s_axi_awvalid,
    output wire        s_axi_awready,
    input  wire [31:0] s_axi_wdata,
    input  wire [3:0]  s_axi_wstrb,
    input  wire        s_axi_wvalid,
    output wire        s_axi_wready,
    output reg  [1:0]  s_axi_bresp,
    output reg         s_axi_bvalid,
    input  wire        s_axi_bready,
    input  wire [5:0]  s_axi_araddr,
    input  wire        s_axi_arvalid,
    output wire        s_axi_arready,
    output reg  [31:0] s_axi_rdata,
    output reg  [1:0]  s_axi_rresp,
    output reg         s_axi_rvalid,
    input  wire        s_axi_rready
);
    localparam [1:0] OKAY = 2'b00;
    localparam [1:0] SLVERR = 2'b10;
    localparam [1:0] DECERR = 2'b11;
    localparam [3:0] LOCKED = 4'd5;
    localparam [3:0] HOLE = 4'd6;
    localparam [3:0] SLOW = 4'd7;

    reg [31:0] r0, r1, r2, r3;
    reg [3:0]  last_strb;
    reg [3:0]  aw_word;
    reg        aw_got;
    reg [31:0] w_data;
    reg [3:0]  w_strb;
    reg        w_got;
    reg [3:0]  r_word;
    reg        r_busy;
    reg [1:0]  r_wait;

    assign s_axi_awready = !aw_got && !s_axi_bvalid;
    assign s_axi_wready = !w_got && !s_axi_bvalid;
    assign s_axi_arready = (NO_ARREADY == 0) && !s_axi_rvalid && !r_busy;

    // old with the bytes strb selects replaced by data's
    function [31:0] merge;
        input [31:0] old;
        input [31:0] data;
        input [3:0]  strb;
        integer b;
        begin
            for (b = 0; b < 4; b = b + 1)
                merge[8*b +: 8] = strb[b] ? data[8*b +: 8] : old[8*b +: 8];
        end
    endfunction

    function [31:0] value;
        input [3:0] word;
        begin
            case (word)
                4'd0: value = r0;
                4'd1: value = r1;
                4'd2: value = r2;
                4'd3: value = r3;
                4'd4: value = 32'hA11E_0001;
                SLOW: value = 32'h5105_5105;
                4'd8: value = {28'd0, last_strb};
                default: value = 32'd0;
            endcase
        end
    endfunction

    always @(posedge clk) begin
        if (!rst_n) begin
            r0 <= 32'd0;
            r1 <= 32'd0;
            r2 <= 32'd0;
            r3 <= 32'd0;
            last_strb <= 4'd0;
            aw_word <= 4'd0;
            aw_got <= 1'b0;
            w_data <= 32'd0;
            w_strb <= 4'd0;
            w_got <= 1'b0;
            s_axi_bresp <= OKAY;
            s_axi_bvalid <= 1'b0;
            r_word <= 4'd0;
            r_busy <= 1'b0;
            r_wait <= 2'd0;
            s_axi_rdata <= 32'd0;
            s_axi_rresp <= OKAY;
            s_axi_rvalid <= 1'b0;
        end else begin
            // write: take AW and W (in either order), then answer on B
            if (s_axi_awvalid && s_axi_awready) begin
                aw_word <= s_axi_awaddr[5:2];
                aw_got <= 1'b1;
            end
            if (s_axi_wvalid && s_axi_wready) begin
                w_data <= s_axi_wdata;
                w_strb <= s_axi_wstrb;
                w_got <= 1'b1;
            end
            if (aw_got && w_got) begin
                aw_got <= 1'b0;
                w_got <= 1'b0;
                last_strb <= w_strb;
                case (aw_word)
                    4'd0: r0 <= merge(r0, w_data, w_strb);
                    4'd1: r1 <= merge(r1, w_data, w_strb);
                    4'd2: r2 <= merge(r2, w_data, w_strb);
                    4'd3: r3 <= merge(r3, w_data, w_strb);
                    default: ;
                endcase
                s_axi_bresp <= aw_word == LOCKED ? SLVERR : aw_word == HOLE ? DECERR : OKAY;
                s_axi_bvalid <= NO_BVALID == 0;
            end
            if (s_axi_bvalid && s_axi_bready) s_axi_bvalid <= 1'b0;
            // read: answer at the next edge, SLOW three edges later
            if (s_axi_arvalid && s_axi_arready) begin
                if (s_axi_araddr[5:2] == SLOW) begin
                    r_word <= SLOW;
                    r_busy <= 1'b1;
                    r_wait <= 2'd2;
                end else begin
                    s_axi_rdata <= value(s_axi_araddr[5:2]);
                    s_axi_rresp <= s_axi_araddr[5:2] == HOLE ? DECERR : OKAY;
                    s_axi_rvalid <= 1'b1;
                end
            end
            if (r_busy) begin
                if (r_wait != 2'd0) begin
                    r_wait <= r_wait - 2'd1;
                end else begin
                    r_busy <= 1'b0;
                    s_axi_rdata <= value(r_word);
                    s_axi_rresp <= OKAY;
                    s_axi_rvalid <= 1'b1;
                end
            end
            if (s_axi_rvalid && s_axi_rready) s_axi_rvalid <= 1'b0;
        end
    end
endmodule

// the working slave
module axi_regs_top (
    input  wire        clk,
    input  wire        rst_n,
    input  wire [5:0]  s_axi_awaddr,
    input  wire        s_axi_awvalid,
    output wire        s_axi_awready,
    input  wire [31:0] s_axi_wdata,
    input  wire [3:0]  s_axi_wstrb,
    input  wire        s_axi_wvalid,
    output wire        s_axi_wready,
    output wire [1:0]  s_axi_bresp,
    output wire        s_axi_bvalid,
    input  wire        s_axi_bready,
    input  wire [5:0]  s_axi_araddr,
    input  wire        s_axi_arvalid,
    output wire        s_axi_arready,
    output wire [31:0] s_axi_rdata,
    output wire [1:0]  s_axi_rresp,
    output wire        s_axi_rvalid,
    input  wire        s_axi_rready
);
    axi_regs #(.NO_BVALID(0), .NO_ARREADY(0)) regs (
        .clk(clk), .rst_n(rst_n),
        .s_axi_awaddr(s_axi_awaddr), .s_axi_awvalid(s_axi_awvalid),
        .s_axi_awready(s_axi_awready),
        .s_axi_wdata(s_axi_wdata), .s_axi_wstrb(s_axi_wstrb), .s_axi_wvalid(s_axi_wvalid),
        .s_axi_wready(s_axi_wready),
        .s_axi_bresp(s_axi_bresp), .s_axi_bvalid(s_axi_bvalid), .s_axi_bready(s_axi_bready),
        .s_axi_araddr(s_axi_araddr), .s_axi_arvalid(s_axi_arvalid),
        .s_axi_arready(s_axi_arready),
        .s_axi_rdata(s_axi_rdata), .s_axi_rresp(s_axi_rresp), .s_axi_rvalid(s_axi_rvalid),
        .s_axi_rready(s_axi_rready)
    );
endmodule

// the broken slave: never BVALID, never ARREADY
module axi_regs_stuck_top (
    input  wire        clk,
    input  wire        rst_n,
    input  wire [5:0]  s_axi_awaddr,
    input  wire        s_axi_awvalid,
    output wire        s_axi_awready,
    input  wire [31:0] s_axi_wdata,
    input  wire [3:0]  s_axi_wstrb,
    input  wire        s_axi_wvalid,
    output wire        s_axi_wready,
    output wire [1:0]  s_axi_bresp,
    output wire        s_axi_bvalid,
    input  wire        s_axi_bready,
    input  wire [5:0]  s_axi_araddr,
    input  wire        s_axi_arvalid,
    output wire        s_axi_arready,
    output wire [31:0] s_axi_rdata,
    output wire [1:0]  s_axi_rresp,
    output wire        s_axi_rvalid,
    input  wire        s_axi_rready
);
    axi_regs #(.NO_BVALID(1), .NO_ARREADY(1)) regs (
        .clk(clk), .rst_n(rst_n),
        .s_axi_awaddr(s_axi_awaddr), .s_axi_awvalid(s_axi_awvalid),
        .s_axi_awready(s_axi_awready),
        .s_axi_wdata(s_axi_wdata), .s_axi_wstrb(s_axi_wstrb), .s_axi_wvalid(s_axi_wvalid),
        .s_axi_wready(s_axi_wready),
        .s_axi_bresp(s_axi_bresp), .s_axi_bvalid(s_axi_bvalid), .s_axi_bready(s_axi_bready),
        .s_axi_araddr(s_axi_araddr), .s_axi_arvalid(s_axi_arvalid),
        .s_axi_arready(s_axi_arready),
        .s_axi_rdata(s_axi_rdata), .s_axi_rresp(s_axi_rresp), .s_axi_rvalid(s_axi_rvalid),
        .s_axi_rready(s_axi_rready)
    );
endmodule

`default_nettype wire
