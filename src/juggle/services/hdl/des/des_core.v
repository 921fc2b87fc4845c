// des_core: iterative DES / Triple-DES (EDE) engine with the register map of juggle's
// DesDriver/TdesDriver (juggle.services.crypto.registers), one Feistel round per clock.
//
// Word index (byte offset)   name        access
//   0 (0x00)   CONTROL    R/W  bit 0 START, bit 1 DECRYPT; reads back the last value written
//   1 (0x04)   STATUS     R    bit 0 BUSY, bit 1 DONE (a block was started and has finished)
//   2 (0x08)   DATA_HI    R/W  input block bytes 0..3 (big-endian)
//   3 (0x0C)   DATA_LO    R/W  input block bytes 4..7
//   4 (0x10)   RESULT_HI  R    output block bytes 0..3
//   5 (0x14)   RESULT_LO  R    output block bytes 4..7
//   8..9       KEY1_HI/LO R/W  key 1
//  10..11      KEY2_HI/LO R/W  key 2 (TRIPLE only; otherwise reads 0, writes ignored)
//  12..13      KEY3_HI/LO R/W  key 3 (TRIPLE only)
//  14 (0x38)   LATENCY    R    16 (DES) or 48 (TDES): cycles per block
//  15 (0x3C)   ID         R    "DES1" or "TDES"
//   others                R    0
//
// Timing: the rising edge that writes CONTROL with START while the core is idle latches the
// operation and the keys and computes round 1 from DATA_HI/DATA_LO; each following edge
// computes one more round. The edge of the last round (16 for DES, 48 for TDES) writes
// RESULT and leaves BUSY, so a START written at edge t is DONE for reads sampled at edge
// t+16 (t+48) and later: the same latency the Python model (TdesCore) counts. Until then
// RESULT keeps the previous block. A START while BUSY is ignored (CONTROL still takes the
// value); DATA and key writes are taken at any time and do not disturb a running block.
//
// Datapath: the state is the Feistel pair (L, R). Between the three TDES passes the final
// permutation of one pass and the initial permutation of the next cancel, so a pass boundary
// only swaps the halves. The key schedule keeps the 56-bit C||D register and rotates it per
// round: left by 1 or 2 when encrypting, right when decrypting (starting unrotated, because
// C16||D16 = C0||D0). TDES encrypts E(K1) D(K2) E(K3) and decrypts D(K3) E(K2) D(K1); the
// keys of passes 2 and 3 are latched (after PC-1) at START.
//
// Written for juggle from FIPS 46-3 and SP 800-67; Verilog-2005.

`default_nettype none

module des_core #(
    parameter integer TRIPLE = 0   // 0: DES, one key, 16 rounds; 1: TDES EDE, 48 rounds
) (
    input  wire          clk,
    input  wire          rst_n,
    input  wire          reg_we,
    input  wire [3:0]    reg_idx,
    input  wire [31:0]   reg_wdata,
    output wire [511:0]  reg_rdata
);
    localparam [5:0]  LAST = (TRIPLE != 0) ? 6'd47 : 6'd15;
    localparam [31:0] LATENCY = (TRIPLE != 0) ? 32'd48 : 32'd16;
    localparam [31:0] CORE_ID = (TRIPLE != 0) ? 32'h54444553 : 32'h44455331;

    // ---- FIPS 46-3 permutations (bit 1 of the standard is the MSB of each vector) --------

    function [63:0] ip;  // initial permutation
        input [63:0] x;
        ip = {x[6], x[14], x[22], x[30], x[38], x[46], x[54], x[62],
              x[4], x[12], x[20], x[28], x[36], x[44], x[52], x[60],
              x[2], x[10], x[18], x[26], x[34], x[42], x[50], x[58],
              x[0], x[8], x[16], x[24], x[32], x[40], x[48], x[56],
              x[7], x[15], x[23], x[31], x[39], x[47], x[55], x[63],
              x[5], x[13], x[21], x[29], x[37], x[45], x[53], x[61],
              x[3], x[11], x[19], x[27], x[35], x[43], x[51], x[59],
              x[1], x[9], x[17], x[25], x[33], x[41], x[49], x[57]};
    endfunction

    function [63:0] fp;  // final permutation, the inverse of ip
        input [63:0] x;
        fp = {x[24], x[56], x[16], x[48], x[8], x[40], x[0], x[32],
              x[25], x[57], x[17], x[49], x[9], x[41], x[1], x[33],
              x[26], x[58], x[18], x[50], x[10], x[42], x[2], x[34],
              x[27], x[59], x[19], x[51], x[11], x[43], x[3], x[35],
              x[28], x[60], x[20], x[52], x[12], x[44], x[4], x[36],
              x[29], x[61], x[21], x[53], x[13], x[45], x[5], x[37],
              x[30], x[62], x[22], x[54], x[14], x[46], x[6], x[38],
              x[31], x[63], x[23], x[55], x[15], x[47], x[7], x[39]};
    endfunction

    function [47:0] expand;  // E: 32 -> 48 bits
        input [31:0] x;
        expand = {x[0], x[31], x[30], x[29], x[28], x[27], x[28], x[27],
                  x[26], x[25], x[24], x[23], x[24], x[23], x[22], x[21],
                  x[20], x[19], x[20], x[19], x[18], x[17], x[16], x[15],
                  x[16], x[15], x[14], x[13], x[12], x[11], x[12], x[11],
                  x[10], x[9], x[8], x[7], x[8], x[7], x[6], x[5],
                  x[4], x[3], x[4], x[3], x[2], x[1], x[0], x[31]};
    endfunction

    function [31:0] pbox;  // P: the permutation after the S-boxes
        input [31:0] x;
        pbox = {x[16], x[25], x[12], x[11], x[3], x[20], x[4], x[15],
                x[31], x[17], x[9], x[6], x[27], x[14], x[1], x[22],
                x[30], x[24], x[8], x[18], x[0], x[5], x[29], x[23],
                x[13], x[19], x[2], x[26], x[10], x[21], x[28], x[7]};
    endfunction

    // PC-1 drops the eight parity bits of the key and PC-2 drops eight bits of C||D: that is
    // the standard, so their unused input bits are waived.
    /* verilator lint_off UNUSEDSIGNAL */
    function [55:0] pc1;  // permuted choice 1: key -> C0 (bits 55..28) || D0 (27..0)
        input [63:0] x;
        pc1 = {x[7], x[15], x[23], x[31], x[39], x[47], x[55], x[63],
               x[6], x[14], x[22], x[30], x[38], x[46], x[54], x[62],
               x[5], x[13], x[21], x[29], x[37], x[45], x[53], x[61],
               x[4], x[12], x[20], x[28], x[1], x[9], x[17], x[25],
               x[33], x[41], x[49], x[57], x[2], x[10], x[18], x[26],
               x[34], x[42], x[50], x[58], x[3], x[11], x[19], x[27],
               x[35], x[43], x[51], x[59], x[36], x[44], x[52], x[60]};
    endfunction

    function [47:0] pc2;  // permuted choice 2: C||D -> round key
        input [55:0] x;
        pc2 = {x[42], x[39], x[45], x[32], x[55], x[51], x[53], x[28],
               x[41], x[50], x[35], x[46], x[33], x[37], x[44], x[52],
               x[30], x[48], x[40], x[49], x[29], x[36], x[43], x[54],
               x[15], x[4], x[25], x[19], x[9], x[1], x[26], x[16],
               x[5], x[11], x[23], x[8], x[12], x[7], x[17], x[0],
               x[22], x[3], x[10], x[14], x[6], x[20], x[27], x[24]};
    endfunction
    /* verilator lint_on UNUSEDSIGNAL */

    // ---- S-boxes: 64 entries of 4 bits each, entry 0 in the most significant nibble --------

    localparam [255:0] S1 = 256'he4d12fb83a6c5907_0f74e2d1a6cb9538_41e8d62bfc973a50_fc8249175b3ea06d;
    localparam [255:0] S2 = 256'hf18e6b34972dc05a_3d47f28ec01a69b5_0e7ba4d158c6932f_d8a13f42b67c05e9;
    localparam [255:0] S3 = 256'ha09e63f51dc7b428_d709346a285ecbf1_d6498f30b12c5ae7_1ad069874fe3b52c;
    localparam [255:0] S4 = 256'h7de3069a1285bc4f_d8b56f03472c1ae9_a690cb7df13e5284_3f06a1d8945bc72e;
    localparam [255:0] S5 = 256'h2c417ab6853fd0e9_eb2c47d150fa3986_421bad78f9c5630e_b8c71e2d6f09a453;
    localparam [255:0] S6 = 256'hc1af92680d34e75b_af427c9561de0b38_9ef528c3704a1db6_432c95fabe17608d;
    localparam [255:0] S7 = 256'h4b2ef08d3c975a61_d0b7491ae35c2f86_14bdc37eaf680592_6bd814a7950fe23c;
    localparam [255:0] S8 = 256'hd2846fb1a93e50c7_1fd8a374c56b0e92_7b419ce206adf358_21e74a8dfc90356b;

    // entry (row = b6 b1, column = b5..b2) of a box; entry n sits at bits 4*(63-n) +: 4
    function [3:0] sbox;
        input [255:0] table_bits;
        input [5:0]   b;
        reg   [5:0]   n;
        begin
            n = {b[5], b[0], b[4:1]};
            sbox = table_bits[{~n, 2'b00} +: 4];
        end
    endfunction

    function [31:0] feistel;  // f(R, K)
        input [31:0] r_half;
        input [47:0] k;
        reg   [47:0] x;
        begin
            x = expand(r_half) ^ k;
            feistel = pbox({sbox(S1, x[47:42]), sbox(S2, x[41:36]), sbox(S3, x[35:30]),
                            sbox(S4, x[29:24]), sbox(S5, x[23:18]), sbox(S6, x[17:12]),
                            sbox(S7, x[11:6]), sbox(S8, x[5:0])});
        end
    endfunction

    // rotate both 28-bit halves of C||D: left (encrypt) or right (decrypt) by 0, 1 or 2
    function [55:0] rotate_cd;
        input [55:0] cd_in;
        input        right;
        input [1:0]  amount;
        reg   [27:0] c;
        reg   [27:0] d;
        begin
            c = cd_in[55:28];
            d = cd_in[27:0];
            case ({right, amount})
                3'b001:  rotate_cd = {c[26:0], c[27], d[26:0], d[27]};
                3'b010:  rotate_cd = {c[25:0], c[27:26], d[25:0], d[27:26]};
                3'b101:  rotate_cd = {c[0], c[27:1], d[0], d[27:1]};
                3'b110:  rotate_cd = {c[1:0], c[27:2], d[1:0], d[27:2]};
                default: rotate_cd = cd_in;
            endcase
        end
    endfunction

    // ---- registers ---------------------------------------------------------------------

    reg [31:0] control;
    reg [31:0] data_hi;
    reg [31:0] data_lo;
    reg [63:0] key1;
    reg [63:0] key2;
    reg [63:0] key3;
    reg [63:0] result;
    reg        busy;
    reg        has_result;
    reg        dec;         // the running block decrypts
    reg [5:0]  rnd;         // index (0-based) of the last round computed
    reg [31:0] l;
    reg [31:0] r;
    reg [55:0] cd;          // C||D of the last round
    reg [55:0] pass2_cd;    // PC-1 of the key of pass 2 (TDES)
    reg [55:0] pass3_cd;    // PC-1 of the key of pass 3 (TDES)

    // ---- next round ----------------------------------------------------------------------

    wire       start = reg_we && (reg_idx == 4'd0) && reg_wdata[0] && !busy;
    wire       op_dec = reg_wdata[1];
    wire [5:0] step = start ? 6'd0 : rnd + 6'd1;       // round computed at this edge
    wire [3:0] pos = step[3:0];                         // round within its pass
    wire [1:0] pass = step[5:4];
    wire       pass_start = (pos == 4'd0);              // first round of a pass
    wire       pass_dec = start ? op_dec : (dec ^ (pass == 2'd1));
    // encryption shifts: 1 before rounds 1, 2, 9, 16, else 2; decryption mirrors them
    wire [1:0] shift = pass_start ? {1'b0, ~pass_dec}
                     : ((pos == 4'd1) || (pos == 4'd8) || (pos == 4'd15)) ? 2'd1 : 2'd2;
    wire [55:0] cd_base = start ? pc1((TRIPLE != 0 && op_dec) ? key3 : key1)
                        : pass_start ? ((pass == 2'd1) ? pass2_cd : pass3_cd)
                        : cd;
    wire [55:0] cd_next = rotate_cd(cd_base, pass_dec, shift);
    wire [63:0] lr_in = start ? ip({data_hi, data_lo})
                      : pass_start ? {r, l}
                      : {l, r};
    wire [31:0] l_next = lr_in[31:0];
    wire [31:0] r_next = lr_in[63:32] ^ feistel(lr_in[31:0], pc2(cd_next));

    always @(posedge clk) begin
        if (!rst_n) begin
            control <= 32'd0;
            data_hi <= 32'd0;
            data_lo <= 32'd0;
            key1 <= 64'd0;
            key2 <= 64'd0;
            key3 <= 64'd0;
            result <= 64'd0;
            busy <= 1'b0;
            has_result <= 1'b0;
            dec <= 1'b0;
            rnd <= 6'd0;
            l <= 32'd0;
            r <= 32'd0;
            cd <= 56'd0;
            pass2_cd <= 56'd0;
            pass3_cd <= 56'd0;
        end else begin
            if (reg_we) begin
                case (reg_idx)
                    4'd0:  control <= reg_wdata;
                    4'd2:  data_hi <= reg_wdata;
                    4'd3:  data_lo <= reg_wdata;
                    4'd8:  key1[63:32] <= reg_wdata;
                    4'd9:  key1[31:0] <= reg_wdata;
                    4'd10: if (TRIPLE != 0) key2[63:32] <= reg_wdata;
                    4'd11: if (TRIPLE != 0) key2[31:0] <= reg_wdata;
                    4'd12: if (TRIPLE != 0) key3[63:32] <= reg_wdata;
                    4'd13: if (TRIPLE != 0) key3[31:0] <= reg_wdata;
                    default: ;
                endcase
            end
            if (start) begin
                has_result <= 1'b1;
                dec <= op_dec;
                pass2_cd <= pc1(key2);
                pass3_cd <= pc1(op_dec ? key1 : key3);
            end
            if (start || busy) begin
                l <= l_next;
                r <= r_next;
                cd <= cd_next;
                rnd <= step;
                if (step == LAST) begin
                    busy <= 1'b0;
                    result <= fp({r_next, l_next});
                end else begin
                    busy <= 1'b1;
                end
            end
        end
    end

    // ---- register file as the bus wrapper reads it ------------------------------------------

    wire [31:0] status = busy ? 32'd1 : (has_result ? 32'd2 : 32'd0);

    assign reg_rdata = {CORE_ID, LATENCY,                     // 15, 14
                        key3[31:0], key3[63:32],              // 13, 12
                        key2[31:0], key2[63:32],              // 11, 10
                        key1[31:0], key1[63:32],              //  9,  8
                        32'd0, 32'd0,                         //  7,  6
                        result[31:0], result[63:32],          //  5,  4
                        data_lo, data_hi, status, control};   //  3 .. 0
endmodule

`default_nettype wire
