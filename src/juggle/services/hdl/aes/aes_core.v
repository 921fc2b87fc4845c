// aes_core: AES-128 (FIPS-197) encryption and decryption, one round per clock, with the
// register map of juggle's AesDriver (juggle.services.crypto.aes_hw).
//
// Word index (byte offset)   name        access
//   0 (0x00)   CONTROL    R/W  bit 0 START, bit 1 DECRYPT; reads back the last value written
//   1 (0x04)   STATUS     R    bit 0 BUSY, bit 1 DONE (a block was started and has finished)
//   2 (0x08)   LATENCY    R    11: cycles per block
//   3 (0x0C)   ID         R    0x41455331 ("AES1")
//   4..7       KEY0..3    R/W  key bytes 0..3 .. 12..15 (big-endian words; read back)
//   8..11      DATA0..3   R/W  input block bytes 0..3 .. 12..15
//  12..15      RESULT0..3 R    output block bytes 0..3 .. 12..15
// Writes to read-only registers are ignored. Every word of the 0x40-byte window is a
// register; common/jg_regbus.v answers 0 for offsets outside it or unaligned.
//
// Timing: the rising edge that writes CONTROL with START while the core is idle latches the
// operation and does the first of 11 steps; each following edge does one more. A START while
// BUSY is ignored (CONTROL still takes the value); DATA and KEY writes are taken at any time
// and do not disturb a running block. The edge of step 11 (t+10 for a START at edge t) writes
// RESULT0..3 and leaves BUSY, so reads sampled at edge t+11 and later see DONE and the new
// block: the 11 cycles the Python model (AesCore) counts. Until then RESULT keeps the
// previous block.
//
// Datapath: the S-boxes are synchronous ROMs (aes_sbox below, one block RAM each on a Xilinx
// part: 512 bytes, the S-box and its inverse, two read ports), so the state lives in the
// ROMs' output registers and each edge looks up the next state's bytes:
//   encrypt  step 1: S(SR(DATA ^ K0)); steps 2..10: S(SR(MC(s) ^ K(j-1))); step 11: s ^ K10
//   decrypt  step 1: IS(ISR(DATA ^ K10)); steps 2..10: IS(ISR(IMC(s ^ K(11-j)))); step 11:
//            s ^ K0
// (SubBytes commutes with ShiftRows, so the row shifts are a fixed permutation of the ROM
// addresses.) That is FIPS-197's cipher and its inverse cipher: an initial AddRoundKey and
// ten rounds, one per cycle. The round keys are expanded alongside, one per edge, forwards
// (encrypting, from the key) or backwards (decrypting, from the last round key K10; the
// inverse expansion needs the same forward S-box), with four more ROM read ports.
//
// The last round key (how decryption also takes 11 cycles): a separate key-schedule unit
// (two more ROMs) derives K10 from the key in the background: the edge that writes a KEY
// register loads the new key into it and each of the next ten edges computes one round key,
// so K10 is usable by a START 10 or more edges after the last KEY write (at edge 10 through
// a bypass of the unit's last step). The model does not time this step; the driver never
// gets near it: between its last KEY write and a START it writes DATA0..3 and CONTROL, five
// bus writes, 10 cycles at least on every board profile juggle ships (the fewest:
// virtex4-router's 2-cycle writes). A decrypting START g < 10 cycles after a KEY write is
// not refused: BUSY rises at once and the block begins at the edge K10 is usable, 10 - g
// edges later (it then uses DATA0..3 and K10 as they are at that edge; a KEY write meanwhile
// restarts the unit, so the block waits for the new key's K10), and finishes 10 - g cycles
// later than the model says. Encryption needs no K10 and is never delayed.
//
// 12 block RAMs (16 state, 4 round-key and 4 key-schedule look-ups a cycle, two per ROM).
// The ROMs are filled by an initial loop that computes the S-box and its inverse from their
// definition (FIPS-197 5.1.1; see aes_sbox): memory initialisation, evaluated by synthesis at
// elaboration as a block RAM's INIT attributes are, not logic.
//
// Written for juggle from FIPS 197; Verilog-2005.

`default_nettype none

// aes_sbox: a 512-byte ROM, the AES S-box at 0..255 and its inverse at 256..511, with two
// synchronous read ports (the data appears at the edge after the address, as a block RAM's).
// It lives in this file because the design's sources are fixed (common, core, top).
/* verilator lint_off DECLFILENAME */
module aes_sbox (
    input  wire       clk,
    input  wire [8:0] addr_a,
    input  wire [8:0] addr_b,
    output reg  [7:0] q_a,
    output reg  [7:0] q_b
);
    function [7:0] times2;  // multiplication by 02 in GF(2^8) modulo x^8 + x^4 + x^3 + x + 1
        input [7:0] a;
        times2 = {a[6:0], 1'b0} ^ (a[7] ? 8'h1b : 8'h00);
    endfunction

    function [7:0] affine;  // FIPS-197 5.1.1: b ^ rotl(b, 1..4) ^ 63
        input [7:0] b;
        affine = b ^ {b[6:0], b[7]} ^ {b[5:0], b[7:6]} ^ {b[4:0], b[7:5]} ^ {b[3:0], b[7:4]}
               ^ 8'h63;
    endfunction

    // The S-box is the multiplicative inverse followed by the affine transformation (FIPS-197
    // 5.1.1). 03 generates the multiplicative group of GF(2^8), so the loop walks p = 03^k
    // and q = 03^-k = p's inverse together (03^-1 = f6): S(p) = affine(q), IS(S(p)) = p;
    // and S(00) = 63, IS(63) = 00.
    // block RAM on every family (Yosys and the vendors' tools read rom_style; without it
    // synthesis for 6-input-LUT parts builds the twelve ROMs from LUTs)
    (* rom_style = "block" *) reg [7:0] rom [0:511];
    reg [7:0] p;
    reg [7:0] q;
    reg [7:0] s;
    reg [7:0] t2, t4, t8, t16, t32, t64, t128;
    integer k;
    initial begin
        rom[9'h000] = 8'h63;
        rom[9'h163] = 8'h00;
        p = 8'h01;
        q = 8'h01;
        /*verilator unroll_disable*/
        for (k = 0; k < 255; k = k + 1) begin
            s = affine(q);
            rom[{1'b0, p}] = s;
            rom[{1'b1, s}] = p;
            p = p ^ times2(p);  // * 03
            t2 = times2(q);     // * f6 = 80 + 40 + 20 + 10 + 04 + 02
            t4 = times2(t2);
            t8 = times2(t4);
            t16 = times2(t8);
            t32 = times2(t16);
            t64 = times2(t32);
            t128 = times2(t64);
            q = t128 ^ t64 ^ t32 ^ t16 ^ t4 ^ t2;
        end
    end

    always @(posedge clk) begin
        q_a <= rom[addr_a];
        q_b <= rom[addr_b];
    end
endmodule
/* verilator lint_on DECLFILENAME */

module aes_core (
    input  wire          clk,
    input  wire          rst_n,
    input  wire          reg_we,
    input  wire [3:0]    reg_idx,
    input  wire [31:0]   reg_wdata,
    output wire [511:0]  reg_rdata
);
    localparam [31:0] LATENCY = 32'd11;
    localparam [31:0] CORE_ID = 32'h41455331;  // "AES1"
    localparam [3:0]  LAST = 4'd10;            // index of the last step (steps 0..10)

    // ---- GF(2^8) arithmetic and the round functions (state byte k is bits 127-8k -: 8) ----

    function [7:0] xt;  // multiply by x (02) modulo x^8 + x^4 + x^3 + x + 1
        input [7:0] a;
        xt = {a[6:0], 1'b0} ^ (a[7] ? 8'h1b : 8'h00);
    endfunction

    function [31:0] mix_column;  // MixColumns of one column {a0, a1, a2, a3}
        input [31:0] col;
        reg   [7:0]  a0, a1, a2, a3;
        begin
            {a0, a1, a2, a3} = col;
            mix_column = {xt(a0) ^ xt(a1) ^ a1 ^ a2 ^ a3,
                          a0 ^ xt(a1) ^ xt(a2) ^ a2 ^ a3,
                          a0 ^ a1 ^ xt(a2) ^ xt(a3) ^ a3,
                          xt(a0) ^ a0 ^ a1 ^ a2 ^ xt(a3)};
        end
    endfunction

    // InvMixColumns (multipliers 0e 0b 0d 09) is MixColumns after this step: its matrix is
    // the MixColumns matrix times the circulant (05 00 04 00), which adds 04*(a0^a2) to a0
    // and a2 and 04*(a1^a3) to a1 and a3.
    function [31:0] pre_inv_mix_column;
        input [31:0] col;
        reg   [7:0]  a0, a1, a2, a3;
        reg   [7:0]  u, v;
        begin
            {a0, a1, a2, a3} = col;
            u = xt(xt(a0 ^ a2));
            v = xt(xt(a1 ^ a3));
            pre_inv_mix_column = {a0 ^ u, a1 ^ v, a2 ^ u, a3 ^ v};
        end
    endfunction

    function [127:0] mix;
        input [127:0] s;
        mix = {mix_column(s[127:96]), mix_column(s[95:64]),
               mix_column(s[63:32]), mix_column(s[31:0])};
    endfunction

    function [127:0] pre_inv_mix;
        input [127:0] s;
        pre_inv_mix = {pre_inv_mix_column(s[127:96]), pre_inv_mix_column(s[95:64]),
                       pre_inv_mix_column(s[63:32]), pre_inv_mix_column(s[31:0])};
    endfunction

    function [7:0] rcon;  // round constant of round key j (1..10)
        input [3:0] j;
        case (j)
            4'd1:    rcon = 8'h01;
            4'd2:    rcon = 8'h02;
            4'd3:    rcon = 8'h04;
            4'd4:    rcon = 8'h08;
            4'd5:    rcon = 8'h10;
            4'd6:    rcon = 8'h20;
            4'd7:    rcon = 8'h40;
            4'd8:    rcon = 8'h80;
            4'd9:    rcon = 8'h1b;
            4'd10:   rcon = 8'h36;
            default: rcon = 8'h00;
        endcase
    endfunction

    function [31:0] rot;  // RotWord
        input [31:0] w;
        rot = {w[23:0], w[31:24]};
    endfunction

    // round key j from round key j-1, given sw = SubWord(RotWord(last word of key j-1))
    function [127:0] key_forward;
        input [127:0] k;
        input [31:0]  sw;
        input [7:0]   rc;
        reg   [31:0]  w0, w1, w2, w3;
        begin
            w0 = k[127:96] ^ sw ^ {rc, 24'd0};
            w1 = k[95:64] ^ w0;
            w2 = k[63:32] ^ w1;
            w3 = k[31:0] ^ w2;
            key_forward = {w0, w1, w2, w3};
        end
    endfunction

    // round key j-1 from round key j, given sw = SubWord(RotWord(w2 ^ w3 of key j))
    function [127:0] key_backward;
        input [127:0] k;
        input [31:0]  sw;
        input [7:0]   rc;
        key_backward = {k[127:96] ^ sw ^ {rc, 24'd0}, k[127:96] ^ k[95:64],
                        k[95:64] ^ k[63:32], k[63:32] ^ k[31:0]};
    endfunction

    // the word whose SubWord(RotWord()) the next expansion step needs, rotated
    function [31:0] schedule_word;
        input [63:0] w23;  // the key's last two words
        input        backward;
        schedule_word = rot(backward ? (w23[63:32] ^ w23[31:0]) : w23[31:0]);
    endfunction

    // ---- registers ---------------------------------------------------------------------

    reg  [31:0]  control;
    reg  [127:0] data;
    reg  [127:0] key;
    reg  [127:0] result;
    reg          busy;
    reg          waiting;     // a decryption waits for the key-schedule unit (see header)
    reg          has_result;
    reg          dec;         // the running block decrypts
    reg  [3:0]   rnd;         // index of the last step done
    reg  [127:0] rk;          // round key of the last step
    reg  [127:0] dk;          // key-schedule unit: round key dn of the key (K10 when dn = 10)
    reg  [3:0]   dn;
    wire [127:0] sb;          // state: ROM outputs, S-box look-ups of the last step
    wire [31:0]  ksb;         // SubWord(RotWord(schedule_word(rk))) of the last step
    wire [31:0]  dks;         // the same for dk

    // ---- next step -----------------------------------------------------------------------

    wire         key_we = reg_we && (reg_idx[3:2] == 2'b01);
    wire [1:0]   key_word = reg_idx[1:0];
    wire [127:0] key_next = {(key_we && key_word == 2'd0) ? reg_wdata : key[127:96],
                             (key_we && key_word == 2'd1) ? reg_wdata : key[95:64],
                             (key_we && key_word == 2'd2) ? reg_wdata : key[63:32],
                             (key_we && key_word == 2'd3) ? reg_wdata : key[31:0]};

    // key-schedule unit: K10 usable at this edge when dn is 10, or 9 through the bypass
    wire [127:0] dk_step = key_forward(dk, dks, rcon(dn + 4'd1));
    wire         derived = (dn == LAST) || (dn == LAST - 4'd1);
    wire [127:0] last_key = (dn == LAST) ? dk : dk_step;
    wire [127:0] dk_next = !rst_n ? 128'd0
                         : key_we ? key_next
                         : (dn != LAST) ? dk_step
                         : dk;

    wire         start = reg_we && (reg_idx == 4'd0) && reg_wdata[0] && !busy;
    wire         op_dec = reg_wdata[1];
    wire         launch = (start && (!op_dec || derived)) || (waiting && derived);
    wire         launch_dec = start ? op_dec : 1'b1;   // a waiting block decrypts
    wire         running = busy && !waiting;
    wire         mode_dec = launch ? launch_dec : dec;
    wire [3:0]   step = rnd + 4'd1;                      // step done at this edge
    wire [127:0] rk_step = dec ? key_backward(rk, ksb, rcon(4'd11 - step))
                               : key_forward(rk, ksb, rcon(step));
    wire [127:0] first_key = launch_dec ? last_key : key;
    wire [127:0] rk_next = launch ? first_key : rk_step;
    // a round: encrypt MC(s) ^ K, decrypt IMC(s ^ K) = MC(pre_inv_mix(s ^ K)) (one shared
    // MixColumns is no smaller after synthesis: Yosys/ABC give more LUTs for it)
    wire [127:0] mixed = dec ? mix(pre_inv_mix(sb ^ rk_step)) : mix(sb);
    wire [127:0] x = launch ? (data ^ first_key)
                   : dec ? mixed
                   : (mixed ^ rk_step);

    // state ROM addresses: byte k of SR(x) (encrypt) or ISR(x) (decrypt); byte k is row
    // k % 4, column k / 4, and row r shifts by r columns
    wire [143:0] addr;
    genvar g;
    generate
        for (g = 0; g < 16; g = g + 1) begin : lookup
            localparam integer ROW = g % 4;
            localparam integer COL = g / 4;
            localparam integer FWD = ROW + 4 * ((COL + ROW) % 4);
            localparam integer BWD = ROW + 4 * ((COL + 4 - ROW) % 4);
            assign addr[9*(15-g) +: 9] = mode_dec ? {1'b1, x[8*(15-BWD) +: 8]}
                                                  : {1'b0, x[8*(15-FWD) +: 8]};
        end
        for (g = 0; g < 8; g = g + 1) begin : state_rom
            aes_sbox sbox (
                .clk(clk),
                .addr_a(addr[9*(15-2*g) +: 9]), .addr_b(addr[9*(14-2*g) +: 9]),
                .q_a(sb[8*(15-2*g) +: 8]), .q_b(sb[8*(14-2*g) +: 8])
            );
        end
    endgenerate

    wire [31:0] kw = schedule_word(rk_next[63:0], mode_dec);
    wire [31:0] dw = rot(dk_next[31:0]);
    aes_sbox key_rom_hi (
        .clk(clk), .addr_a({1'b0, kw[31:24]}), .addr_b({1'b0, kw[23:16]}),
        .q_a(ksb[31:24]), .q_b(ksb[23:16])
    );
    aes_sbox key_rom_lo (
        .clk(clk), .addr_a({1'b0, kw[15:8]}), .addr_b({1'b0, kw[7:0]}),
        .q_a(ksb[15:8]), .q_b(ksb[7:0])
    );
    aes_sbox schedule_rom_hi (
        .clk(clk), .addr_a({1'b0, dw[31:24]}), .addr_b({1'b0, dw[23:16]}),
        .q_a(dks[31:24]), .q_b(dks[23:16])
    );
    aes_sbox schedule_rom_lo (
        .clk(clk), .addr_a({1'b0, dw[15:8]}), .addr_b({1'b0, dw[7:0]}),
        .q_a(dks[15:8]), .q_b(dks[7:0])
    );

    always @(posedge clk) begin
        if (!rst_n) begin
            control <= 32'd0;
            data <= 128'd0;
            key <= 128'd0;
            result <= 128'd0;
            busy <= 1'b0;
            waiting <= 1'b0;
            has_result <= 1'b0;
            dec <= 1'b0;
            rnd <= 4'd0;
            rk <= 128'd0;
            dk <= 128'd0;
            dn <= 4'd0;
        end else begin
            if (reg_we) begin
                case (reg_idx)
                    4'd0:  control <= reg_wdata;
                    4'd8:  data[127:96] <= reg_wdata;
                    4'd9:  data[95:64] <= reg_wdata;
                    4'd10: data[63:32] <= reg_wdata;
                    4'd11: data[31:0] <= reg_wdata;
                    default: ;
                endcase
            end
            key <= key_next;
            dk <= dk_next;
            if (key_we) begin
                dn <= 4'd0;
            end else if (dn != LAST) begin
                dn <= dn + 4'd1;
            end
            if (start) begin
                has_result <= 1'b1;
                busy <= 1'b1;
                waiting <= !launch;
            end
            if (launch) begin
                waiting <= 1'b0;
                dec <= launch_dec;
                rnd <= 4'd0;
                rk <= rk_next;
            end else if (running) begin
                rk <= rk_next;
                rnd <= step;
                if (step == LAST) begin
                    busy <= 1'b0;
                    result <= sb ^ rk_step;
                end
            end
        end
    end

    // ---- register file as the bus wrapper reads it ------------------------------------------

    wire [31:0] status = busy ? 32'd1 : (has_result ? 32'd2 : 32'd0);

    assign reg_rdata = {result[31:0], result[63:32], result[95:64], result[127:96],  // 15..12
                        data[31:0], data[63:32], data[95:64], data[127:96],          // 11..8
                        key[31:0], key[63:32], key[95:64], key[127:96],              //  7..4
                        CORE_ID, LATENCY, status, control};                          //  3..0
endmodule

`default_nettype wire
