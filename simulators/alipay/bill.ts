/**
 * The Alipay simulator's trade bill: the archive `alipay.data.dataservice.bill.downloadurl.query`
 * points at, made as Alipay's is described (a ZIP of two CSV files in GBK, their names in GBK
 * without the UTF-8 flag: `{pid}_{date}_业务明细.csv` and `{pid}_{date}_业务明细(汇总).csv`), from the
 * simulator's own trades. Written here, not with the adapter's reader (src/lib/zip.ts), so that the
 * two sides are not checked by the same hands.
 */
import { crc32, deflateRawSync } from 'node:zlib';

let gbkTable: Map<string, Buffer> | null = null;

/** Text as GBK bytes: the table is TextDecoder's GBK read backwards (two-byte codes 0x81-0xFE, 0x40-0xFE). */
export function gbk(text: string): Buffer {
  if (gbkTable === null) {
    gbkTable = new Map();
    const d = new TextDecoder('gbk');
    for (let lead = 0x81; lead <= 0xfe; lead++) {
      for (let trail = 0x40; trail <= 0xfe; trail++) {
        if (trail === 0x7f) continue;
        const ch = d.decode(Buffer.from([lead, trail]));
        if (ch.length === 1 && ch !== '\ufffd' && !gbkTable.has(ch)) gbkTable.set(ch, Buffer.from([lead, trail]));
      }
    }
  }
  const out: Buffer[] = [];
  for (const ch of text) {
    const code = ch.codePointAt(0)!;
    if (code < 0x80) out.push(Buffer.from([code]));
    else {
      const b = gbkTable.get(ch);
      if (!b) throw new Error(`simulator: ${ch} has no GBK code`);
      out.push(b);
    }
  }
  return Buffer.concat(out);
}

/** A ZIP archive of deflated files, names as given (bytes). */
export function zip(files: { name: Buffer; data: Buffer }[]): Buffer {
  const locals: Buffer[] = [];
  const centrals: Buffer[] = [];
  let offset = 0;
  for (const f of files) {
    const packed = deflateRawSync(f.data);
    const crc = crc32(f.data);
    const local = Buffer.alloc(30);
    local.writeUInt32LE(0x04034b50, 0);
    local.writeUInt16LE(20, 4); // version needed
    local.writeUInt16LE(0, 6); // flags: no UTF-8 name
    local.writeUInt16LE(8, 8); // deflate
    local.writeUInt32LE(crc, 14);
    local.writeUInt32LE(packed.length, 18);
    local.writeUInt32LE(f.data.length, 22);
    local.writeUInt16LE(f.name.length, 26);
    const central = Buffer.alloc(46);
    central.writeUInt32LE(0x02014b50, 0);
    central.writeUInt16LE(20, 4);
    central.writeUInt16LE(20, 6);
    central.writeUInt16LE(8, 10);
    central.writeUInt32LE(crc, 16);
    central.writeUInt32LE(packed.length, 20);
    central.writeUInt32LE(f.data.length, 24);
    central.writeUInt16LE(f.name.length, 28);
    central.writeUInt32LE(offset, 42);
    locals.push(local, f.name, packed);
    centrals.push(central, f.name);
    offset += local.length + f.name.length + packed.length;
  }
  const directory = Buffer.concat(centrals);
  const end = Buffer.alloc(22);
  end.writeUInt32LE(0x06054b50, 0);
  end.writeUInt16LE(files.length, 8);
  end.writeUInt16LE(files.length, 10);
  end.writeUInt32LE(directory.length, 12);
  end.writeUInt32LE(offset, 16);
  return Buffer.concat([...locals, directory, end]);
}

/** The columns of the detail file (业务明细), as Alipay's trade bill has them. */
export const DETAIL_HEADER =
  '支付宝交易号,商户订单号,业务类型,商品名称,创建时间,完成时间,门店编号,门店名称,操作员,终端号,对方账户,订单金额（元）,商家实收（元）,支付宝红包（元）,集分宝（元）,支付宝优惠（元）,商家优惠（元）,券核销金额（元）,券名称,商家红包消费金额（元）,卡消费金额（元）,退款批次号/请求号,服务费（元）,分润（元）,备注';

export interface BillRow {
  tradeNo: string;
  outTradeNo: string;
  type: '交易' | '退款';
  subject: string;
  createdAt: string;
  finishedAt: string;
  /** Yuan, negative for a refund. */
  amount: string;
  requestNo: string;
}

/** The archive of a day: the detail file and its summary, as Alipay names and encodes them. */
export function billArchive(pid: string, day: string, rows: BillRow[]): Buffer {
  const ymd = day.replaceAll('-', '');
  const [y, m, d] = day.split('-');
  const next = new Date(Date.parse(`${day}T00:00:00Z`) + 86_400_000).toISOString().slice(0, 10).split('-');
  const period = `#起始日期：[${y}年${m}月${d}日 00:00:00]   终止日期：[${next[0]}年${next[1]}月${next[2]}日 00:00:00]`;
  const trades = rows.filter((r) => r.type === '交易');
  const refunds = rows.filter((r) => r.type === '退款');
  const sum = (rs: BillRow[]) => (rs.reduce((a, r) => a + Math.round(Number(r.amount) * 100), 0) / 100).toFixed(2);
  const detail = [
    '#支付宝业务明细查询',
    `#账号：[${pid}0156]`,
    period,
    '#-----------------------------------------业务明细列表----------------------------------------',
    DETAIL_HEADER,
    ...rows.map((r) =>
      [
        `${r.tradeNo}\t`,
        `${r.outTradeNo}\t`,
        r.type,
        r.subject,
        r.createdAt,
        r.finishedAt,
        '\t',
        '\t',
        '\t',
        '\t',
        'buy***@alipay-simulator.invalid\t',
        r.amount,
        r.amount,
        '0.00',
        '0.00',
        '0.00',
        '0.00',
        '0.00',
        '',
        '0.00\t',
        '0.00',
        r.requestNo ? `${r.requestNo}\t` : '',
        '0.00',
        '0.00',
        '',
      ].join(','),
    ),
    '#-----------------------------------------业务明细列表结束------------------------------------',
    `#交易合计：${trades.length}笔，商家实收共${sum(trades)}元，商家优惠共0.00元`,
    `#退款合计：${refunds.length}笔，商家实收退款共${sum(refunds)}元，商家优惠退款共0.00元`,
    '#导出时间：[simulated]',
  ];
  const summary = [
    '#支付宝业务汇总查询',
    `#账号：[${pid}0156]`,
    period,
    '门店编号,门店名称,交易订单总笔数,退款订单总笔数,订单金额（元）',
    `,,${trades.length},${refunds.length},${sum(rows)}`,
  ];
  return zip([
    { name: gbk(`${pid}_${ymd}_业务明细.csv`), data: gbk(`${detail.join('\r\n')}\r\n`) },
    { name: gbk(`${pid}_${ymd}_业务明细(汇总).csv`), data: gbk(`${summary.join('\r\n')}\r\n`) },
  ]);
}
