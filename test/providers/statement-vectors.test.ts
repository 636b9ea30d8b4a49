/**
 * The acquirers' bill readers against fixed bills (test/providers/vectors/statements/README.md
 * names each source): WeChat Pay's published ALL trade bill, and an Alipay trade bill archive made
 * by another tool (Python's zipfile) in Alipay's described layout: GBK names and text, comments,
 * trailing tabs, a refund row. Plus the readers' refusals of a bill they cannot read.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { describe, test } from 'node:test';
import { textLines } from '../../src/lib/lines.ts';
import { zipEntries } from '../../src/lib/zip.ts';
import { alipayBillLines, csvFields, parseAlipayTradeBill } from '../../src/providers/alipay/bill.ts';
import { ProviderUncertainError, type ProviderStatementLine } from '../../src/providers/provider.ts';
import { parseWechatTradeBill } from '../../src/providers/wechatpay/bill.ts';

const dir = path.join(import.meta.dirname, 'vectors', 'statements');

async function all(lines: AsyncIterable<ProviderStatementLine>): Promise<ProviderStatementLine[]> {
  const out = [];
  for await (const l of lines) out.push(l);
  return out;
}

async function* chunks(b: Buffer, size = 7): AsyncGenerator<Buffer> {
  for (let i = 0; i < b.length; i += size) yield b.subarray(i, i + size);
}

describe("WeChat Pay's trade bill", () => {
  test("the documentation's ALL bill: one payment row, read in small chunks, with and without a byte order mark", async () => {
    const text = fs.readFileSync(path.join(dir, 'wechatpay-trade-bill.txt'));
    for (const bytes of [text, Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), text])]) {
      const lines = await all(parseWechatTradeBill(textLines(chunks(bytes), 'utf-8')));
      assert.deepEqual(lines, [
        {
          kind: 'PAYMENT',
          subjectId: '2021WERUN1647840687637',
          providerRef: '420000612032130748613220688',
          amountFen: 1,
          state: 'PAID',
          at: new Date('2022-03-21T13:51:31+08:00'),
        },
      ]);
    }
  });

  test('a refund row (its state and amount from 退款状态 and 申请退款金额) and a revoked payment', async () => {
    const header = fs.readFileSync(path.join(dir, 'wechatpay-trade-bill.txt'), 'utf8').split('\n')[0]!;
    const row = (status: string, refundNo: string, refundState: string, order: string, refund: string) =>
      [
        '2022-03-22 09:00:00',
        'wxfdc955f7104ad557',
        '180023671',
        '0',
        '',
        '4200006120321307486',
        'T_0001',
        'openid',
        'JSAPI',
        status,
        'OTHERS',
        'CNY',
        order,
        '0.00',
        refundNo ? '503000001' : '0',
        refundNo || '0',
        refund,
        '0.00',
        refundNo ? 'ORIGINAL' : '',
        refundState,
        'Coffee, large',
        '',
        '0.00000',
        '0.60%',
        order,
        refund,
        '',
      ]
        .map((v) => `\`${v}`)
        .join(',');
    const text = [
      header,
      row('REFUND', 'RF_0001', 'PROCESSING', '0.00', '12.34'),
      row('REVOKED', '', '', '5.00', '0.00'),
      '总交易单数',
      '`2',
    ].join('\r\n');
    const lines = await all(parseWechatTradeBill(textLines(chunks(Buffer.from(text)), 'utf-8')));
    assert.deepEqual(
      lines.map((l) => [l.kind, l.subjectId, l.providerRef, l.amountFen, l.state]),
      [
        ['REFUND', 'RF_0001', '503000001', 1234, 'PENDING'],
        ['PAYMENT', 'T_0001', '4200006120321307486', 500, 'REVOKED'],
      ],
    );
  });

  test('a bill it cannot read is an uncertain answer: tried again later, never half taken', async () => {
    for (const text of [
      '交易时间,商户订单号\n`2022-03-21 13:51:31,`x',
      '交易时间,公众账号ID,商户号,特约商户号,设备号,微信订单号,商户订单号,用户标识,交易类型,交易状态\nno back quote',
    ]) {
      await assert.rejects(all(parseWechatTradeBill(textLines(chunks(Buffer.from(text)), 'utf-8'))), ProviderUncertainError);
    }
  });
});

describe("Alipay's trade bill", () => {
  const zip = fs.readFileSync(path.join(dir, 'alipay-trade-bill.zip'));

  test('the archive: two GBK-named entries without the UTF-8 flag', () => {
    const gbk = new TextDecoder('gbk');
    assert.deepEqual(
      zipEntries(zip).map((e) => [e.utf8Name, gbk.decode(e.name)]),
      [
        [false, '2088000000000000_20260501_业务明细.csv'],
        [false, '2088000000000000_20260501_业务明细(汇总).csv'],
      ],
    );
  });

  test('the detail file: a payment and its refund, amounts exact, trailing tabs and comments left out', async () => {
    assert.deepEqual(await all(parseAlipayTradeBill(alipayBillLines(zip))), [
      {
        kind: 'PAYMENT',
        subjectId: 'att_0123456789abcdefghjkm',
        providerRef: '2026050122001400000000000001',
        amountFen: 3580,
        state: 'PAID',
        at: new Date('2026-05-01T10:00:30+08:00'),
      },
      {
        kind: 'REFUND',
        subjectId: 'rf_0123456789abcdefghjkm',
        providerRef: '2026050122001400000000000001',
        amountFen: 1000,
        state: 'SUCCEEDED',
        at: new Date('2026-05-01T18:30:00+08:00'),
      },
    ]);
  });

  test('CSV fields: quoted commas and quotes, blanks and tabs trimmed', () => {
    assert.deepEqual(csvFields('a\t,"b, c","d ""e""",  f ,'), ['a', 'b, c', 'd "e"', 'f', '']);
  });

  test('an archive without the detail file (here: none at all), or not a ZIP, is refused', () => {
    assert.throws(() => alipayBillLines(Buffer.from('not a zip at all, not even close to one')));
    assert.throws(() => alipayBillLines(Buffer.from('PK\u0005\u0006' + '\u0000'.repeat(18), 'latin1')), ProviderUncertainError);
  });
});
