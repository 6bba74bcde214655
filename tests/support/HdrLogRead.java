// Reads an HdrHistogram log with HdrHistogram's own Java HistogramLogReader and prints one
// line per histogram: "<tag or -> <start s> <end s> <total count> <max value>", then
// "start <StartTime s>". tests/test_hdr_log.py runs it with the HdrHistogram jar from the
// local Maven repository, as the reference reader of the format nhbench writes.
import org.HdrHistogram.EncodableHistogram;
import org.HdrHistogram.Histogram;
import org.HdrHistogram.HistogramLogReader;

public class HdrLogRead {
  public static void main(String[] args) throws Exception {
    HistogramLogReader reader = new HistogramLogReader(args[0]);
    EncodableHistogram h;
    while ((h = reader.nextIntervalHistogram()) != null) {
      Histogram histogram = (Histogram) h;
      String tag = histogram.getTag() == null ? "-" : histogram.getTag();
      System.out.printf(java.util.Locale.US, "%s %.3f %.3f %d %d%n", tag,
          histogram.getStartTimeStamp() / 1000.0, histogram.getEndTimeStamp() / 1000.0,
          histogram.getTotalCount(), histogram.getMaxValue());
    }
    System.out.printf(java.util.Locale.US, "start %.3f%n", reader.getStartTimeSec());
  }
}
