// adpcm_core: the IMA ADPCM decoder core with the register map of juggle's AdpcmDriver
// (juggle.services.audio), one 4-bit code decoded per clock.
//
// Word index (byte offset)   name        access
//   0 (0x00)   CONTROL    W    bit 0 RESET: predictor 0, step index 0 (ignored while BUSY)
//   1 (0x04)   STATUS     R    bit 0 BUSY, bit 1 DONE (the PCM registers hold a decoded word)
//   2 (0x08)   COUNT      R/W  codes taken from the next DATA word, 1..8 (0 or > 8 means 8)
//   3 (0x0C)   DATA       W    packed codes, first sample in bits 3..0; writing starts decoding
//   4..7       PCM0..PCM3 R    samples 2i (bits 15..0) and 2i+1 (bits 31..16) of the last word
//   8 (0x20)   PREDICTOR  R/W  16-bit two's complement (sign-extended on read)
//   9 (0x24)   STEP_INDEX R/W  0..88 (writes are clamped)
//  14 (0x38)   LATENCY    R    1: cycles per sample
//  15 (0x3C)   ID         R    "ADPC"
//   others                R    0 (CONTROL and DATA read 0 too)
//
// Timing: the rising edge that writes DATA while the core is idle latches the word and COUNT
// and decodes the first code; each following edge decodes one more. The edge of the last code
// (COUNT of them) updates PCM0..PCM3 (samples past COUNT read 0), PREDICTOR and STEP_INDEX
// and leaves BUSY, so a DATA write at edge t is DONE for reads sampled at edge t+COUNT and
// later, as in the Python model (AdpcmCore). Until then the PCM, PREDICTOR and STEP_INDEX
// registers show the previous word's values. While BUSY every write but COUNT is ignored.
//
// Decoding one code c at step s (the IMA algorithm, shift-and-add, no multiplier):
//   diff = s/8 + (c&4 ? s : 0) + (c&2 ? s/2 : 0) + (c&1 ? s/4 : 0)
//   predictor = clamp(predictor -/+ diff (c&8: minus), -32768, 32767)
//   index = clamp(index + {-1,-1,-1,-1,2,4,6,8}[c&7], 0, 88)
// The 89-entry step table is a ROM read synchronously: step_q always holds the step of the
// index the next code will use (its address is the next value of that index), so the ROM can
// be a block RAM.
//
// Written for juggle from the IMA ADPCM algorithm; Verilog-2005.

`default_nettype none

module adpcm_core (
    input  wire          clk,
    input  wire          rst_n,
    input  wire          reg_we,
    input  wire [3:0]    reg_idx,
    input  wire [31:0]   reg_wdata,
    output wire [511:0]  reg_rdata
);
    localparam [31:0] CORE_ID = 32'h41445043;
    localparam [6:0]  MAX_INDEX = 7'd88;

    // visible state
    reg [15:0]  pred;
    reg [6:0]   idx;
    reg [3:0]   cnt;
    reg [127:0] pcm;        // sample i at bits 16*i +: 16
    reg         busy;
    reg         has_result;
    // the word being decoded
    reg [31:0]  word;
    reg [3:0]   n;          // codes in it
    reg [2:0]   k;          // index of the last code decoded
    reg [15:0]  wpred;
    reg [6:0]   widx;
    reg [127:0] wpcm;
    reg [14:0]  step_q;     // step size of the index the next code uses

    // ---- one code ------------------------------------------------------------------------

    wire        start = reg_we && (reg_idx == 4'd3) && !busy;
    wire [2:0]  sel = start ? 3'd0 : k + 3'd1;
    wire [31:0] codes = start ? reg_wdata : word;
    wire [3:0]  code = codes[{sel, 2'b00} +: 4];
    wire [15:0] p_in = start ? pred : wpred;
    wire [6:0]  i_in = start ? idx : widx;
    wire [3:0]  n_eff = start ? cnt : n;

    wire [16:0] diff = {5'd0, step_q[14:3]}
                     + (code[2] ? {2'd0, step_q} : 17'd0)
                     + (code[1] ? {3'd0, step_q[14:1]} : 17'd0)
                     + (code[0] ? {4'd0, step_q[14:2]} : 17'd0);
    wire [17:0] p_ext = {{2{p_in[15]}}, p_in};
    wire [17:0] p_sum = code[3] ? p_ext - {1'b0, diff} : p_ext + {1'b0, diff};
    // p_sum lies in [-98304, 98302]: bit 17 is the sign, bits 16..15 show an overflow
    wire        too_low = p_sum[17] && (p_sum[16:15] != 2'b11);
    wire        too_high = !p_sum[17] && (p_sum[16:15] != 2'b00);
    wire [15:0] pred_n = too_low ? 16'h8000 : too_high ? 16'h7fff : p_sum[15:0];

    wire [7:0]  i_sum = {1'b0, i_in} + (code[2] ? {4'd0, {1'b0, code[1:0]} + 3'd1, 1'b0} : 8'hff);
    wire [6:0]  idx_n = i_sum[7] ? 7'd0 : (i_sum[6:0] > MAX_INDEX) ? MAX_INDEX : i_sum[6:0];

    wire        last = ({1'b0, sel} + 4'd1 == n_eff);
    // the word's samples so far, with this code's sample in slot sel (a new word starts at 0)
    wire [127:0] pcm_n;
    genvar j;
    generate
        for (j = 0; j < 8; j = j + 1) begin : slot
            localparam [2:0] J = j;
            assign pcm_n[16*j +: 16] = (sel == J) ? pred_n
                                     : start ? 16'd0
                                     : wpcm[16*j +: 16];
        end
    endgenerate

    // ---- register writes while idle ---------------------------------------------------------

    wire        idle_we = reg_we && !busy;
    wire        do_reset = idle_we && (reg_idx == 4'd0) && reg_wdata[0];
    wire        set_pred = idle_we && (reg_idx == 4'd8);
    wire        set_idx = idle_we && (reg_idx == 4'd9);
    wire [6:0]  idx_written = (reg_wdata > {25'd0, MAX_INDEX}) ? MAX_INDEX : reg_wdata[6:0];
    wire [3:0]  cnt_written = ((reg_wdata >= 32'd1) && (reg_wdata <= 32'd8)) ? reg_wdata[3:0]
                                                                             : 4'd8;

    // the index the next code will use, after this edge: the step ROM's address
    wire [6:0]  next_index = !rst_n ? 7'd0
                           : (start || busy) ? idx_n
                           : do_reset ? 7'd0
                           : set_idx ? idx_written
                           : idx;

    always @(posedge clk) begin
        if (!rst_n) begin
            pred <= 16'd0;
            idx <= 7'd0;
            cnt <= 4'd8;
            pcm <= 128'd0;
            busy <= 1'b0;
            has_result <= 1'b0;
            word <= 32'd0;
            n <= 4'd8;
            k <= 3'd0;
            wpred <= 16'd0;
            widx <= 7'd0;
            wpcm <= 128'd0;
        end else begin
            if (reg_we && (reg_idx == 4'd2)) cnt <= cnt_written;
            if (start || busy) begin
                wpred <= pred_n;
                widx <= idx_n;
                wpcm <= pcm_n;
                k <= sel;
                if (start) begin
                    word <= reg_wdata;
                    n <= cnt;
                    has_result <= 1'b1;
                end
                if (last) begin
                    busy <= 1'b0;
                    pcm <= pcm_n;
                    pred <= pred_n;
                    idx <= idx_n;
                end else begin
                    busy <= 1'b1;
                end
            end else if (do_reset) begin
                pred <= 16'd0;
                idx <= 7'd0;
            end else if (set_pred) begin
                pred <= reg_wdata[15:0];
            end else if (set_idx) begin
                idx <= idx_written;
            end
        end
    end

    // ---- the step-size ROM (IMA ADPCM's 89 step sizes), read synchronously ---------------------

    (* rom_style = "block" *)
    reg [14:0] step_rom [0:127];
    integer e;
    initial begin
        for (e = 89; e < 128; e = e + 1) step_rom[e] = 15'd0;  // past 88: never read
        step_rom[0] = 15'd7; step_rom[1] = 15'd8; step_rom[2] = 15'd9; step_rom[3] = 15'd10;
        step_rom[4] = 15'd11; step_rom[5] = 15'd12; step_rom[6] = 15'd13; step_rom[7] = 15'd14;
        step_rom[8] = 15'd16; step_rom[9] = 15'd17; step_rom[10] = 15'd19; step_rom[11] = 15'd21;
        step_rom[12] = 15'd23; step_rom[13] = 15'd25; step_rom[14] = 15'd28; step_rom[15] = 15'd31;
        step_rom[16] = 15'd34; step_rom[17] = 15'd37; step_rom[18] = 15'd41; step_rom[19] = 15'd45;
        step_rom[20] = 15'd50; step_rom[21] = 15'd55; step_rom[22] = 15'd60; step_rom[23] = 15'd66;
        step_rom[24] = 15'd73; step_rom[25] = 15'd80; step_rom[26] = 15'd88; step_rom[27] = 15'd97;
        step_rom[28] = 15'd107; step_rom[29] = 15'd118; step_rom[30] = 15'd130; step_rom[31] = 15'd143;
        step_rom[32] = 15'd157; step_rom[33] = 15'd173; step_rom[34] = 15'd190; step_rom[35] = 15'd209;
        step_rom[36] = 15'd230; step_rom[37] = 15'd253; step_rom[38] = 15'd279; step_rom[39] = 15'd307;
        step_rom[40] = 15'd337; step_rom[41] = 15'd371; step_rom[42] = 15'd408; step_rom[43] = 15'd449;
        step_rom[44] = 15'd494; step_rom[45] = 15'd544; step_rom[46] = 15'd598; step_rom[47] = 15'd658;
        step_rom[48] = 15'd724; step_rom[49] = 15'd796; step_rom[50] = 15'd876; step_rom[51] = 15'd963;
        step_rom[52] = 15'd1060; step_rom[53] = 15'd1166; step_rom[54] = 15'd1282; step_rom[55] = 15'd1411;
        step_rom[56] = 15'd1552; step_rom[57] = 15'd1707; step_rom[58] = 15'd1878; step_rom[59] = 15'd2066;
        step_rom[60] = 15'd2272; step_rom[61] = 15'd2499; step_rom[62] = 15'd2749; step_rom[63] = 15'd3024;
        step_rom[64] = 15'd3327; step_rom[65] = 15'd3660; step_rom[66] = 15'd4026; step_rom[67] = 15'd4428;
        step_rom[68] = 15'd4871; step_rom[69] = 15'd5358; step_rom[70] = 15'd5894; step_rom[71] = 15'd6484;
        step_rom[72] = 15'd7132; step_rom[73] = 15'd7845; step_rom[74] = 15'd8630; step_rom[75] = 15'd9493;
        step_rom[76] = 15'd10442; step_rom[77] = 15'd11487; step_rom[78] = 15'd12635; step_rom[79] = 15'd13899;
        step_rom[80] = 15'd15289; step_rom[81] = 15'd16818; step_rom[82] = 15'd18500; step_rom[83] = 15'd20350;
        step_rom[84] = 15'd22385; step_rom[85] = 15'd24623; step_rom[86] = 15'd27086; step_rom[87] = 15'd29794;
        step_rom[88] = 15'd32767;
    end

    always @(posedge clk) begin
        step_q <= step_rom[next_index];
    end

    // ---- register file as the bus wrapper reads it ------------------------------------------

    wire [31:0] status = busy ? 32'd1 : (has_result ? 32'd2 : 32'd0);

    assign reg_rdata = {CORE_ID, 32'd1,                        // 15 ID, 14 LATENCY
                        {4{32'd0}},                            // 13 .. 10
                        {25'd0, idx}, {{16{pred[15]}}, pred},  //  9, 8
                        pcm,                                   //  7 .. 4
                        32'd0, {28'd0, cnt}, status, 32'd0};   //  3 .. 0
endmodule

`default_nettype wire
