// gcd_axi_tb: a self-checking testbench of gcd_top's AXI4-Lite slave port, for what juggle's
// harness never does (it always raises AWVALID with WVALID and takes B and R at once):
//   - AW before W, W before AW (with gaps) and both together, each with BREADY late or early;
//   - BVALID/BRESP held while BREADY is low, RVALID/RDATA/RRESP held while RREADY is low
//     (checked at every cycle by a monitor), every response OKAY;
//   - no second write taken while a write response waits, and it completes after;
//   - a read and a write in the same cycles; byte strobes; unmapped offsets read 0;
//   - ready outputs do not follow valid inputs within a cycle (no combinational path);
//   - one GCD through the port (ap_start, poll ap_done, RESULT).
// It prints "PASS <checks>" at the end, or "FAIL ..." lines and "FAILED <count>".
//
// Inputs change at falling edges only, so the rising edge after sees them; a handshake is
// seen at a falling edge (valid and ready both high) and happens at the next rising edge.
// Written for juggle; Verilog-2005 (Icarus: iverilog -g2005).

`timescale 1ns / 1ps
`default_nettype none

module gcd_axi_tb;
    reg         clk = 1'b0;
    reg         rst_n = 1'b0;
    reg  [5:0]  awaddr = 6'd0, araddr = 6'd0;
    reg         awvalid = 1'b0, wvalid = 1'b0, bready = 1'b0, arvalid = 1'b0, rready = 1'b0;
    reg  [31:0] wdata = 32'd0;
    reg  [3:0]  wstrb = 4'd0;
    wire        awready, wready, bvalid, arready, rvalid;
    wire [1:0]  bresp, rresp;
    wire [31:0] rdata;

    gcd_top dut (
        .clk(clk), .rst_n(rst_n),
        .s_axi_awaddr(awaddr), .s_axi_awvalid(awvalid), .s_axi_awready(awready),
        .s_axi_wdata(wdata), .s_axi_wstrb(wstrb), .s_axi_wvalid(wvalid), .s_axi_wready(wready),
        .s_axi_bresp(bresp), .s_axi_bvalid(bvalid), .s_axi_bready(bready),
        .s_axi_araddr(araddr), .s_axi_arvalid(arvalid), .s_axi_arready(arready),
        .s_axi_rdata(rdata), .s_axi_rresp(rresp), .s_axi_rvalid(rvalid), .s_axi_rready(rready)
    );

    always #5 clk = ~clk;

    integer errors = 0;
    integer checks = 0;

    task check(input ok, input [8*48-1:0] what);
        begin
            checks = checks + 1;
            if (!ok) begin
                errors = errors + 1;
                $display("FAIL: %0s at %0t", what, $time);
            end
        end
    endtask

    // -- the monitor: responses held until taken, every response OKAY --------------------------
    reg        p_bvalid = 1'b0, p_bready = 1'b0, p_rvalid = 1'b0, p_rready = 1'b0;
    reg [1:0]  p_bresp = 2'd0, p_rresp = 2'd0;
    reg [31:0] p_rdata = 32'd0;
    always @(negedge clk) if (rst_n) begin
        if (p_bvalid && !p_bready) check(bvalid && bresp == p_bresp, "BVALID/BRESP held");
        if (p_rvalid && !p_rready)
            check(rvalid && rdata == p_rdata && rresp == p_rresp, "RVALID/RDATA held");
        if (bvalid) check(bresp == 2'b00, "BRESP OKAY");
        if (rvalid) check(rresp == 2'b00, "RRESP OKAY");
        p_bvalid = bvalid; p_bready = bready; p_bresp = bresp;
        p_rvalid = rvalid; p_rready = rready; p_rdata = rdata; p_rresp = rresp;
    end

    // -- channels (each called at a falling edge, returns at one) -----------------------------
    task aw_channel(input [5:0] addr, input integer delay);
        reg before;
        begin
            repeat (delay) @(negedge clk);
            before = awready;
            awaddr = addr;
            awvalid = 1'b1;
            #1 check(awready == before, "AWREADY does not follow AWVALID");
            while (!awready) @(negedge clk);
            @(negedge clk);
            awvalid = 1'b0;
            awaddr = 6'd0;
        end
    endtask

    task w_channel(input [31:0] data, input [3:0] strb, input integer delay);
        reg before;
        begin
            repeat (delay) @(negedge clk);
            before = wready;
            wdata = data;
            wstrb = strb;
            wvalid = 1'b1;
            #1 check(wready == before, "WREADY does not follow WVALID");
            while (!wready) @(negedge clk);
            @(negedge clk);
            wvalid = 1'b0;
            wdata = 32'd0;
            wstrb = 4'd0;
        end
    endtask

    // BREADY raised ``delay`` cycles after BVALID (early: raised at once, before BVALID)
    task b_channel(input integer delay, input early);
        begin
            if (early) bready = 1'b1;
            while (!bvalid) @(negedge clk);
            repeat (delay) @(negedge clk);
            bready = 1'b1;
            @(negedge clk);
            bready = 1'b0;
        end
    endtask

    task write(input [5:0] addr, input [31:0] data, input [3:0] strb,
               input integer aw_delay, input integer w_delay, input integer b_delay,
               input early);
        fork
            aw_channel(addr, aw_delay);
            w_channel(data, strb, w_delay);
            b_channel(b_delay, early);
        join
    endtask

    reg [31:0] got;
    task read(input [5:0] addr, input integer r_delay);
        reg before;
        begin
            before = arready;
            araddr = addr;
            arvalid = 1'b1;
            #1 check(arready == before, "ARREADY does not follow ARVALID");
            while (!arready) @(negedge clk);
            @(negedge clk);
            arvalid = 1'b0;
            araddr = 6'd0;
            while (!rvalid) @(negedge clk);
            repeat (r_delay) @(negedge clk);
            got = rdata;
            rready = 1'b1;
            @(negedge clk);
            rready = 1'b0;
        end
    endtask

    integer aw_d, w_d, b_d, polls;
    initial begin
        repeat (4) @(negedge clk);
        check(!bvalid && !rvalid, "no response out of reset");
        rst_n = 1'b1;
        @(negedge clk);
        // every order of AW and W, late and early BREADY: the value lands
        for (aw_d = 0; aw_d < 4; aw_d = aw_d + 1)
            for (w_d = 0; w_d < 4; w_d = w_d + 1)
                for (b_d = 0; b_d < 3; b_d = b_d + 1) begin
                    write(6'h10, {aw_d[7:0], w_d[7:0], b_d[7:0], 8'h5A}, 4'hF, aw_d, w_d, b_d,
                          b_d == 1);
                    read(6'h10, b_d);
                    check(got == {aw_d[7:0], w_d[7:0], b_d[7:0], 8'h5A}, "write in any order");
                end
        // byte strobes
        write(6'h18, 32'hFFFF_FFFF, 4'hF, 0, 0, 0, 1'b1);
        write(6'h18, 32'h1122_3344, 4'b0101, 0, 0, 0, 1'b1);
        read(6'h18, 0);
        check(got == 32'hFF22_FF44, "byte strobes");
        // a second write waits for the first one's response: nothing taken while BVALID waits
        fork
            write(6'h10, 32'd1071, 4'hF, 0, 0, 6, 1'b0);
            begin
                @(negedge clk);
                @(negedge clk);
                while (!bvalid) @(negedge clk);
                check(!awready && !wready, "no write taken while BVALID waits");
            end
        join
        write(6'h18, 32'd462, 4'hF, 0, 0, 0, 1'b0);
        read(6'h10, 0);
        check(got == 32'd1071, "A after a held response");
        // a read and a write at the same time
        fork
            read(6'h10, 2);
            write(6'h04, 32'd1, 4'hF, 0, 1, 1, 1'b0);
        join
        check(got == 32'd1071, "read beside a write");
        read(6'h04, 0);
        check(got == 32'd1, "write beside a read");
        // unmapped offsets read 0 and keep nothing
        write(6'h14, 32'hDEAD_BEEF, 4'hF, 0, 0, 0, 1'b1);
        read(6'h14, 0);
        check(got == 32'd0, "unmapped offset reads 0");
        read(6'h3C, 1);
        check(got == 32'd0, "last offset reads 0");
        // one GCD: gcd(1071, 462) = 21
        write(6'h00, 32'd1, 4'hF, 0, 0, 0, 1'b1);
        polls = 0;
        got = 32'd0;
        while (!got[1] && polls < 200) begin
            read(6'h00, polls % 3);
            polls = polls + 1;
        end
        check(got[1] && got[2], "ap_done and ap_idle");
        read(6'h20, 1);
        check(got == 32'd21, "gcd(1071, 462) = 21");
        read(6'h24, 0);
        check(got == 32'd1, "RESULT_VLD");
        read(6'h24, 0);
        check(got == 32'd0, "RESULT_VLD clears on read");
        if (errors == 0) $display("PASS %0d", checks);
        else $display("FAILED %0d", errors);
        $finish;
    end

    initial begin
        #200000;
        $display("FAIL: timeout (a handshake never completed)");
        $display("FAILED %0d", errors + 1);
        $finish;
    end
endmodule

`default_nettype wire
